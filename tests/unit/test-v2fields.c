/* The fields the shim selects on CUPTI's v2 path (client-lib/v2-fields.c):
 * KIND first, each id once, each named as the decoder names it (so that
 * the layouts the shim sends decode: an unknown name would be ignored and
 * the field lost), and every field the decoder needs for a trace is there. */
#include "config.h"

#include <string.h>

#include "client-lib/v2-fields.h"
#include "cupti-abi.h"
#include "layouts.h"
#include "tests/unit/testlib.h"

static int decoder_has(unsigned type, const char *name)
{
    unsigned n;
    const char *const *names = cuptimon__rec_field_names(type, &n);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

START_TEST(selections_name_decoder_fields)
{
    unsigned kinds = 0;
    for (uint32_t k = 1; k < CUPTIMON_LAYOUT_KINDS; k++) {
        for (int lat = 0; lat < 2; lat++) {
            size_t n;
            const struct cuptimon_v2_field *f = cuptimon__v2_fields(k, lat, &n);
            if (f == NULL)
                continue;
            unsigned type = cuptimon__rec_type_of_kind(k);
            ck_assert_msg(type != CUPTIMON_REC_NONE, "kind %u is selected but not decoded", k);
            kinds += lat == 0;
            ck_assert_int_eq(f[0].id, 0); /* KIND first */
            ck_assert_ptr_null(f[0].name);
            for (size_t i = 1; i < n; i++) {
                ck_assert_msg(f[i].name && decoder_has(type, f[i].name),
                              "kind %u field id %d: \"%s\" is not a decoder field", k, f[i].id,
                              f[i].name ? f[i].name : "(null)");
                ck_assert_int_gt(f[i].id, 0);
                for (size_t j = 0; j < i; j++)
                    ck_assert_int_ne(f[i].id, f[j].id);
                ck_assert_str_eq(cuptimon__v2_field_name(k, f[i].id), f[i].name);
            }
        }
    }
    /* kernel (both kinds), memcpy, memcpy2, memset, runtime, driver,
     * external correlation, overhead, CUDA event, synchronization, marker,
     * marker data: every kind a window enables. */
    ck_assert_uint_eq(kinds, 13);
}
END_TEST

START_TEST(kernel_selection)
{
    size_t n, nl;
    const struct cuptimon_v2_field *f =
        cuptimon__v2_fields(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0, &n);
    const struct cuptimon_v2_field *fl =
        cuptimon__v2_fields(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 1, &nl);
    static const char *const need[] = {"start",
                                       "end",
                                       "deviceId",
                                       "contextId",
                                       "streamId",
                                       "correlationId",
                                       "name",
                                       "gridX",
                                       "blockX",
                                       "registersPerThread",
                                       "dynamicSharedMemory",
                                       "graphNodeId"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        int found = 0;
        for (size_t j = 0; j < n; j++)
            found |= f[j].name && strcmp(f[j].name, need[i]) == 0;
        ck_assert_msg(found, "the kernel selection lacks %s", need[i]);
    }
    /* The latency timestamps only when asked for (they cost 16 bytes). */
    ck_assert_uint_eq(nl, n + 2);
    for (size_t j = 0; j < n; j++)
        ck_assert_int_ne(f[j].id, KERNEL_FIELD_QUEUED);
    ck_assert_int_eq(fl[nl - 2].id, KERNEL_FIELD_QUEUED);
    ck_assert_int_eq(fl[nl - 1].id, KERNEL_FIELD_SUBMITTED);
    ck_assert_ptr_null(cuptimon__v2_fields(9, 0, &n)); /* CONTEXT: not enabled */
    ck_assert_ptr_null(cuptimon__v2_field_name(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0));
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("v2fields");
    TCase *t = tcase_create("v2fields");
    tcase_add_test(t, selections_name_decoder_fields);
    tcase_add_test(t, kernel_selection);
    suite_add_tcase(s, t);
    return s;
}
