/* The fields the shim selects on CUPTI's v2 path (user-defined records),
 * per activity kind: CUPTI's field ids (proto/cupti-abi.h) with the names
 * the decoder reads them by (proto/layouts.h).  Data only, so that a unit
 * test holds every name against the decoder's lists. */
#ifndef CUPTIMON_V2_FIELDS_H
#define CUPTIMON_V2_FIELDS_H

#include <stddef.h>
#include <stdint.h>

struct cuptimon_v2_field {
    int id;           /* CUPTI's field id of the kind */
    const char *name; /* the decoder's name; NULL for KIND (id 0, always first) */
};

/* The selection for kind (KIND first), or NULL for a kind the shim does
 * not enable on the v2 path; *n is set to its length.  latency: the
 * kernel's QUEUED and SUBMITTED too (CUPTIMON_KERNEL_LATENCY). */
const struct cuptimon_v2_field *cuptimon__v2_fields(uint32_t kind, int latency, size_t *n);

/* The decoder's name of CUPTI field id of kind in the selections above,
 * or NULL (KIND, an id not selected, a kind not enabled). */
const char *cuptimon__v2_field_name(uint32_t kind, int id);

#endif
