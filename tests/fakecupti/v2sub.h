/* The workload's own CUPTI subscriber (v2sub.c). */
#ifndef CUPTIMON_V2SUB_H
#define CUPTIMON_V2SUB_H

#include <stdint.h>
#include <stdio.h>

/* Subscribes as name (allow_others: allowMultipleSubscribers) with
 * user-defined kernel and memcpy records of its own selection.  0, or -1
 * (said on stderr; the subscriber is then absent from the report's
 * counts). */
int cuptimon__v2sub_start(const char *name, int allow_others);
/* Flushes, then writes the report's "v2_subscriber" member (a line ending
 * in a comma) to f; nothing when no subscriber was asked for. */
void cuptimon__v2sub_report(FILE *f, uint32_t first_corr, uint32_t last_corr);

#endif
