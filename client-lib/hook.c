/*
 * Routing other libraries' CUPTI activity calls to mux.c when the shim is
 * only injected (CUDA_INJECTION64_PATH).
 *
 * Injected, the shim is loaded RTLD_LOCAL by the driver, after the job's
 * own libraries: its exported cuptiActivity* entry points interpose on
 * nothing, so a tool such as torch.profiler's Kineto would call libcupti
 * directly and replace the shim's callbacks.  Instead, the shim rewrites
 * the relocated import slots (GOT entries: R_*_JUMP_SLOT and R_*_GLOB_DAT)
 * that name those entry points in every loaded object other than libcupti
 * and itself, so that their calls reach mux.c just as a preloaded shim's
 * interposition would.  It does so at start and again whenever objects were
 * loaded since the last scan (checked at most once a second from the IO
 * thread) or another client is found to have taken CUPTI.
 *
 * Writes are single aligned pointer stores; a page under RELRO is made
 * writable for the store and read-only again.  Calls through pointers the
 * caller got from dlsym() are not seen: that case is what the takeover
 * detection in io.c is for.  CUPTIMON_HOOK=0 turns this off.
 */
#include "config.h"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT  R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT  R_AARCH64_GLOB_DAT
#endif

#if defined(R_JUMP_SLOT) && defined(__LP64__)

struct scan {
    const struct cuptimon_hook *targets;
    size_t ntargets;
    uintptr_t self, cupti; /* addresses inside objects never patched */
    unsigned patched, failed;
};

/* Is address a inside a segment of the given type of this object? */
static int in_segment(const struct dl_phdr_info *info, uintptr_t a, ElfW(Word) type)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == type && a >= lo && a < lo + ph->p_memsz)
            return 1;
    }
    return 0;
}

static int covers(const struct dl_phdr_info *info, uintptr_t a)
{
    return in_segment(info, a, PT_LOAD);
}

/* The dynamic section's pointers are relocated by glibc on these targets;
 * an object whose entries were left as file offsets is adjusted here. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
    return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

static int store(const struct dl_phdr_info *info, void **slot, void *fn)
{
    if (__atomic_load_n(slot, __ATOMIC_RELAXED) == fn)
        return 0;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = (uintptr_t)slot & ~((uintptr_t)pg - 1);
    int relro = in_segment(info, (uintptr_t)slot, PT_GNU_RELRO);
    if (relro && mprotect((void *)page, (size_t)pg, PROT_READ | PROT_WRITE) < 0)
        return -1;
    __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    if (relro)
        mprotect((void *)page, (size_t)pg, PROT_READ);
    return 1;
}

static void patch_table(struct scan *sc, const struct dl_phdr_info *info, const ElfW(Rela) * rel,
                        size_t bytes, const ElfW(Sym) * symtab, const char *strtab, size_t strsz)
{
    for (size_t i = 0; i < bytes / sizeof *rel; i++) {
        unsigned type = (unsigned)ELF64_R_TYPE(rel[i].r_info);
        size_t sym = ELF64_R_SYM(rel[i].r_info);
        /* Only imports: an object that defines the name itself (another
         * interposer) keeps its own calls. */
        if ((type != R_JUMP_SLOT && type != R_GLOB_DAT) || sym == 0 ||
            symtab[sym].st_shndx != SHN_UNDEF)
            continue;
        size_t off = symtab[sym].st_name;
        if (off >= strsz)
            continue;
        const char *name = strtab + off;
        /* Every target starts with "cupti": one compare skips the rest. */
        if (strncmp(name, "cupti", 5) != 0)
            continue;
        for (size_t t = 0; t < sc->ntargets; t++) {
            if (strcmp(name, sc->targets[t].name) != 0)
                continue;
            int r = store(info, (void **)(info->dlpi_addr + rel[i].r_offset), sc->targets[t].fn);
            if (r > 0)
                sc->patched++;
            else if (r < 0)
                sc->failed++;
            break;
        }
    }
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct scan *sc = arg;
    (void)size;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    base = base ? base + 1 : info->dlpi_name ? info->dlpi_name : "";
    /* Never libcupti itself (any copy: its own internal calls stay its
     * own), nor the shim. */
    if (covers(info, sc->self) || (sc->cupti && covers(info, sc->cupti)) ||
        (strncmp(base, "libcupti", 8) == 0 && (base[8] == '.' || base[8] == '-')))
        return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    size_t strsz = 0, jmpsz = 0, relasz = 0;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    int pltrel_rela = 1;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_STRSZ: strsz = dyn->d_un.d_val; break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmpsz = dyn->d_un.d_val; break;
        case DT_PLTREL: pltrel_rela = dyn->d_un.d_val == DT_RELA; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_RELASZ: relasz = dyn->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab)
        return 0;
    if (jmprel && pltrel_rela)
        patch_table(sc, info, jmprel, jmpsz, symtab, strtab, strsz);
    if (rela)
        patch_table(sc, info, rela, relasz, symtab, strtab, strsz);
    return 0;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        *(unsigned long long *)arg = info->dlpi_adds;
    return 1; /* the counters are the same in every entry: one is enough */
}

int cuptimon__hook_scan(const struct cuptimon_hook *targets, size_t n, void *self, void *cupti,
                        unsigned long long *adds)
{
    struct scan sc = {
        .targets = targets, .ntargets = n, .self = (uintptr_t)self, .cupti = (uintptr_t)cupti};
    if (adds)
        dl_iterate_phdr(count_adds, adds);
    dl_iterate_phdr(visit, &sc);
    return sc.failed && !sc.patched ? -1 : (int)sc.patched;
}

unsigned long long cuptimon__hook_generation(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    return adds;
}

#else

int cuptimon__hook_scan(const struct cuptimon_hook *targets, size_t n, void *self, void *cupti,
                        unsigned long long *adds)
{
    (void)targets, (void)n, (void)self, (void)cupti, (void)adds;
    return 0;
}

unsigned long long cuptimon__hook_generation(void)
{
    return 0;
}

#endif
