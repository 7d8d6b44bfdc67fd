/*
 * The GPU metrics the daemon knows (issue 34) and the judgement of a
 * metric set before it runs (issue 48): which words of gpu_metrics_set it
 * takes, and which sets are known to make CUPTI's decoding cost a large
 * part of a CPU core.  No CUPTI here: the configuration check
 * (cuptimond --check-config, a reload) and the sampler (gpm.c) share it.
 */
#ifndef CUPTIMON_DAEMON_GPM_SET_H
#define CUPTIMON_DAEMON_GPM_SET_H

#include <stddef.h>

#define CUPTIMON_GPM_ALTS 2

struct cuptimon_gpm_known {
    const char *key, *cupti, *unit, *label;
    const char *prom, *prom_help; /* Prometheus name; the DCGM field it is like */
    double prom_scale;            /* value * scale = the exported value */
    /* Another CUPTI name that measures the same (the earlier default): a
     * set that names it keeps the key, its Prometheus name and stats rows. */
    const char *alt[CUPTIMON_GPM_ALTS];
};
extern const struct cuptimon_gpm_known cuptimon__gpm_known[];
extern const size_t cuptimon__gpm_nknown;

/* The entry a word of gpu_metrics_set names: a key in any case, or the
 * entry's CUPTI name or its alt exactly.  -1 when none. */
int cuptimon__gpm_known_find(const char *word);
/* Whether a word has the form of a CUPTI metric name ("unit__counter..."):
 * such names are checked against the chip when sampling starts. */
int cuptimon__gpm_is_cupti_name(const char *word);

struct cuptimon_gpm_judgement {
    unsigned nwords;   /* the set's words (the default set's metrics for "") */
    unsigned nunknown; /* words neither a key nor a CUPTI name */
    char unknown[256]; /* the first of them, comma-separated */
    int costly;        /* a known-costly combination of counters */
    char why_costly[400];
};
/* Judges set (words separated by commas or spaces; "": the default set).
 * Returns 0, or -EINVAL with j->unknown set. */
int cuptimon__gpm_set_judge(const char *set, struct cuptimon_gpm_judgement *j);
/* The known keys, comma-separated, for messages. */
void cuptimon__gpm_known_keys(char *out, size_t len);

#endif
