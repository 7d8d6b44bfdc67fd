/*
 * sandbox-run: runs a program under the restrictions of systemd's
 * cuptimond.service that a machine without systemd can still apply, so
 * that sandbox-case.sh can see whether the daemon's GPU metrics work
 * under them:
 *
 *   --mdwe        MemoryDenyWriteExecute=yes as systemd builds it (a seccomp
 *                 filter, systemd.exec(5)): mmap with PROT_WRITE|PROT_EXEC,
 *                 mprotect and pkey_mprotect with PROT_EXEC, shmat with
 *                 SHM_EXEC fail with EPERM;
 *   --unix-only   RestrictAddressFamilies=AF_UNIX: socket and socketpair of
 *                 any other family fail with EAFNOSUPPORT;
 *   --caps none|sys_admin
 *                 CapabilityBoundingSet= (empty), or CAP_SYS_ADMIN alone: a
 *                 root program keeps only the bounding set across exec.
 *
 * Always NoNewPrivileges=yes (the unit sets it; seccomp needs it).  What it
 * cannot apply: DevicePolicy/DeviceAllow (cgroups) and the file system's
 * read-only view.  x86_64 only.
 *
 * usage: sandbox-run [--mdwe] [--unix-only] [--caps none|sys_admin] -- PROGRAM ARGS...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i)) /* little endian */

static struct sock_filter prog[64];
static unsigned n;

static void ins(struct sock_filter f)
{
    if (n == sizeof prog / sizeof prog[0]) {
        fprintf(stderr, "sandbox-run: filter too long\n");
        exit(2);
    }
    prog[n++] = f;
}

/* One syscall's rule: when nr is called and (arg & mask) == val (or !=,
 * with deny_unless), it fails with err; otherwise the next rule. */
static void rule(int nr, int arg, unsigned mask, unsigned val, int deny_unless, int err)
{
    ins((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    ins((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 4));
    ins((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg)));
    ins((struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, mask));
    ins((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, val, deny_unless ? 1 : 0,
                                     deny_unless ? 0 : 1));
    ins((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err));
}

int main(int argc, char **argv)
{
    int mdwe = 0, unix_only = 0, i;
    const char *caps = NULL;
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "--mdwe"))
            mdwe = 1;
        else if (!strcmp(argv[i], "--unix-only"))
            unix_only = 1;
        else if (!strcmp(argv[i], "--caps") && i + 1 < argc)
            caps = argv[++i];
        else {
            fprintf(stderr, "sandbox-run: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (i + 1 >= argc || (caps && strcmp(caps, "none") && strcmp(caps, "sys_admin"))) {
        fprintf(stderr, "usage: sandbox-run [--mdwe] [--unix-only] [--caps none|sys_admin] -- "
                        "PROGRAM ARGS...\n");
        return 2;
    }
    if (caps)
        for (int c = 0; c <= 63; c++) {
            if (c == CAP_SYS_ADMIN && !strcmp(caps, "sys_admin"))
                continue;
            if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
                fprintf(stderr, "sandbox-run: PR_CAPBSET_DROP %d: %s\n", c, strerror(errno));
                return 2;
            }
        }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        fprintf(stderr, "sandbox-run: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
        return 2;
    }
    ins((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                     offsetof(struct seccomp_data, arch)));
    ins((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
    ins((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    if (mdwe) {
        rule(SYS_mmap, 2, PROT_WRITE | PROT_EXEC, PROT_WRITE | PROT_EXEC, 0, EPERM);
        rule(SYS_mprotect, 2, PROT_EXEC, PROT_EXEC, 0, EPERM);
        rule(SYS_pkey_mprotect, 2, PROT_EXEC, PROT_EXEC, 0, EPERM);
        rule(SYS_shmat, 2, SHM_EXEC, SHM_EXEC, 0, EPERM);
    }
    if (unix_only) {
        rule(SYS_socket, 0, 0xffffffffu, AF_UNIX, 1, EAFNOSUPPORT);
        rule(SYS_socketpair, 0, 0xffffffffu, AF_UNIX, 1, EAFNOSUPPORT);
    }
    ins((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    struct sock_fprog fp = {.len = (unsigned short)n, .filter = prog};
    if ((mdwe || unix_only) && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0) < 0) {
        fprintf(stderr, "sandbox-run: PR_SET_SECCOMP: %s\n", strerror(errno));
        return 2;
    }
    execvp(argv[i + 1], argv + i + 1);
    fprintf(stderr, "sandbox-run: %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}
