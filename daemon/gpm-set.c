/*
 * The GPU metrics the daemon knows and the judgement of a set before it
 * runs (issue 48; gpm-set.h).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gpm-set.h"

#define PE ".avg.pct_of_peak_sustained_elapsed"
#define TC "TPC.TriageCompute."

/* What an operator reads on a DCGM dashboard, with the PM sampling name
 * measured to mean it (docs/reference-pmsampling.md; the figures against
 * Nsight Compute: tests/gpu/pm-case.sh).  All of them fit one pass on
 * GH100.  alt: the names that measure the same in another counter
 * configuration (issue 48: the realtime counters NVIDIA's own samplers
 * read, and XLA's TPC.TriageCompute group). */
const struct cuptimon_gpm_known cuptimon__gpm_known[] = {
    {"sm_active",
     "sm__cycles_active" PE,
     "%",
     "SM active",
     "cuptimon_gpu_prof_sm_active",
     "DCGM_FI_PROF_SM_ACTIVE",
     0.01,
     {TC "sm__cycles_active" PE}},
    {"sm_occupancy",
     "sm__warps_active" PE,
     "%",
     "SM occupancy (warps active)",
     "cuptimon_gpu_prof_sm_occupancy",
     "DCGM_FI_PROF_SM_OCCUPANCY",
     0.01,
     {TC "tpc__warps_active_realtime" PE, "sm__warps_active_realtime" PE}},
    {"tensor_active",
     "sm__pipe_tensor_cycles_active" PE,
     "%",
     "Tensor pipe active",
     "cuptimon_gpu_prof_pipe_tensor_active",
     "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
     0.01,
     {TC "sm__pipe_tensor_cycles_active_realtime" PE, "sm__pipe_tensor_cycles_active_realtime" PE}},
    {"dram_active",
     "dram__throughput" PE,
     "%",
     "DRAM active",
     "cuptimon_gpu_prof_dram_active",
     "DCGM_FI_PROF_DRAM_ACTIVE",
     0.01,
     {NULL}},
    {"dram_read_bytes",
     "dram__bytes_read.sum.per_second",
     "B/s",
     "DRAM read",
     "cuptimon_gpu_dram_read_bytes_per_second",
     "DRAM read bytes per second",
     1,
     {NULL}},
    {"dram_write_bytes",
     "dram__bytes_write.sum.per_second",
     "B/s",
     "DRAM write",
     "cuptimon_gpu_dram_write_bytes_per_second",
     "DRAM write bytes per second",
     1,
     {NULL}},
    {"gr_engine_active",
     "gr__cycles_active" PE,
     "%",
     "Graphics engine active",
     "cuptimon_gpu_prof_gr_engine_active",
     "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
     0.01,
     {NULL}},
    {"pcie_rx_bytes",
     "pcie__read_bytes.sum.per_second",
     "B/s",
     "PCIe to GPU",
     "cuptimon_gpu_prof_pcie_rx_bytes",
     "DCGM_FI_PROF_PCIE_RX_BYTES (bytes per second)",
     1,
     {NULL}},
    {"pcie_tx_bytes",
     "pcie__write_bytes.sum.per_second",
     "B/s",
     "PCIe from GPU",
     "cuptimon_gpu_prof_pcie_tx_bytes",
     "DCGM_FI_PROF_PCIE_TX_BYTES (bytes per second)",
     1,
     {NULL}},
    {"nvlink_rx_bytes",
     "nvlrx__bytes.sum.per_second",
     "B/s",
     "NVLink received",
     "cuptimon_gpu_prof_nvlink_rx_bytes",
     "DCGM_FI_PROF_NVLINK_RX_BYTES (bytes per second)",
     1,
     {NULL}},
    {"nvlink_tx_bytes",
     "nvltx__bytes.sum.per_second",
     "B/s",
     "NVLink sent",
     "cuptimon_gpu_prof_nvlink_tx_bytes",
     "DCGM_FI_PROF_NVLINK_TX_BYTES (bytes per second)",
     1,
     {NULL}},
    {"sm_clock",
     "gpc__cycles_elapsed.avg.per_second",
     "Hz",
     "SM clock",
     "cuptimon_gpu_sm_clock",
     "DCGM_FI_DEV_SM_CLOCK (MHz)",
     1e-6,
     {NULL}},
};
const size_t cuptimon__gpm_nknown = sizeof cuptimon__gpm_known / sizeof cuptimon__gpm_known[0];

int cuptimon__gpm_known_find(const char *word)
{
    for (size_t i = 0; i < cuptimon__gpm_nknown; i++) {
        const struct cuptimon_gpm_known *k = &cuptimon__gpm_known[i];
        if (strcasecmp(word, k->key) == 0 || strcmp(word, k->cupti) == 0)
            return (int)i;
        for (size_t a = 0; a < CUPTIMON_GPM_ALTS && k->alt[a]; a++)
            if (strcmp(word, k->alt[a]) == 0)
                return (int)i;
    }
    return -1;
}

int cuptimon__gpm_is_cupti_name(const char *word)
{
    /* "unit__counter" with a unit of lower case letters and digits, after
     * an optional group ("TPC.TriageCompute."). */
    const char *u = strstr(word, "__");
    if (!u || u == word || !u[2])
        return 0;
    const char *b = u;
    while (b > word && b[-1] != '.')
        b--;
    if (b == u)
        return 0;
    for (const char *c = b; c < u; c++)
        if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c))
            return 0;
    return 1;
}

/* The counter a CUPTI name reads ("sm__cycles_active" of
 * "TPC.TriageCompute.sm__cycles_active.avg.pct..."), into out. */
static void base_counter(const char *name, char *out, size_t len)
{
    const char *u = strstr(name, "__"), *b = u ? u : name;
    while (u && b > name && b[-1] != '.')
        b--;
    size_t n = strcspn(b, ".");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), b);
}

void cuptimon__gpm_known_keys(char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < cuptimon__gpm_nknown && o < len; i++) {
        int n = snprintf(out + o, len - o, "%s%s", i ? ", " : "", cuptimon__gpm_known[i].key);
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* What makes a set costly, as measured: on an H100 the non-realtime tensor
 * pipe counter configured together with SM active or warps active cost
 * 0.39-0.53 of a CPU core to decode under load, each of them alone or with
 * any other metric 1-2 % (docs/gpu-runs/20261207-h100-sandbox-pm-cost).
 * The Perf SDK's estimate of the bytes per sample does not tell (4,640
 * bytes for the pair and for either alone): the record stream the GPU
 * writes besides the triggers does. */
static const char *const costly_tensor[] = {"sm__pipe_tensor_cycles_active",
                                            "smsp__pipe_tensor_cycles_active"};
static const char *const costly_with[] = {"sm__cycles_active", "sm__warps_active"};

int cuptimon__gpm_set_judge(const char *set, struct cuptimon_gpm_judgement *j)
{
    char buf[1024], tensor[96] = "", with[96] = "", base[96];
    const char *tname = NULL, *wname = NULL;
    memset(j, 0, sizeof *j);
    snprintf(buf, sizeof buf, "%s", set ? set : "");
    int dflt = buf[strspn(buf, ", ")] == '\0';
    size_t next = 0;
    char *save = NULL, *w = dflt ? NULL : strtok_r(buf, ", ", &save);
    for (;;) {
        const char *name;
        if (dflt) {
            if (next >= cuptimon__gpm_nknown)
                break;
            name = cuptimon__gpm_known[next++].cupti;
        } else {
            if (!w)
                break;
            int k = cuptimon__gpm_known_find(w);
            name = k >= 0 && strcasecmp(w, cuptimon__gpm_known[k].key) == 0
                       ? cuptimon__gpm_known[k].cupti
                       : w;
            if (k < 0 && !cuptimon__gpm_is_cupti_name(w)) {
                size_t l = strlen(j->unknown);
                if (j->nunknown++ < 8)
                    snprintf(j->unknown + l, sizeof j->unknown - l, "%s'%s'", l ? ", " : "", w);
            }
        }
        j->nwords++;
        base_counter(name, base, sizeof base);
        for (size_t i = 0; i < sizeof costly_tensor / sizeof *costly_tensor; i++)
            if (strcmp(base, costly_tensor[i]) == 0 && !tensor[0]) {
                snprintf(tensor, sizeof tensor, "%s", base);
                tname = name;
            }
        for (size_t i = 0; i < sizeof costly_with / sizeof *costly_with; i++)
            if (strcmp(base, costly_with[i]) == 0 && !with[0]) {
                snprintf(with, sizeof with, "%s", base);
                wname = name;
            }
        if (!dflt)
            w = strtok_r(NULL, ", ", &save);
    }
    if (tensor[0] && with[0]) {
        int kt = cuptimon__gpm_known_find(tname), kw = cuptimon__gpm_known_find(wname);
        j->costly = 1;
        snprintf(j->why_costly, sizeof j->why_costly,
                 "%s%s%s%s and %s%s%s%s in one configuration: the non-realtime tensor pipe counter "
                 "with SM active or warps active made decoding cost 40-53 %% of a CPU core per "
                 "busy GPU on an H100 (each alone: 1-2 %%); drop one of them or take the "
                 "default set",
                 tensor, kt >= 0 ? " (" : "", kt >= 0 ? cuptimon__gpm_known[kt].key : "",
                 kt >= 0 ? ")" : "", with, kw >= 0 ? " (" : "",
                 kw >= 0 ? cuptimon__gpm_known[kw].key : "", kw >= 0 ? ")" : "");
    }
    return j->nunknown ? -EINVAL : 0;
}
