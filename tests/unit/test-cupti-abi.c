/* proto/cupti-abi.h against the CUPTI headers of the toolkit configure
 * found.  The product declares the part of CUPTI it uses itself (so that it
 * builds without a toolkit); this file includes the real headers and the
 * project's lists of what it declares, and checks every entry at compile
 * time: each enumerator's and macro's value, each enum type's size, the
 * record header's size, alignment and member offsets, and each callback
 * type and entry point prototype (redeclared with the list's parameter
 * types; C rejects a redeclaration that does not match CUPTI's).  A wrong
 * entry stops this test from compiling, which fails make check.  The
 * Check suite then walks the lists at run time, so that its log shows what
 * was compared with which CUPTI. */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cupti.h>
#include <cupti_version.h>

#define CUPTIMON_CUPTI_ABI_LISTS_ONLY
#include "cupti-abi.h"

#include "tests/unit/testlib.h"

/* Values. */
#define VALUE_CHECK(name, value)                                                                   \
    _Static_assert((long long)(name) == (long long)(value),                                        \
                   "proto/cupti-abi.h gives " #name " = " #value ", the CUPTI headers do not");
CUPTIMON_CUPTI_RESULT_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_ACTIVITY_KIND_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_ACTIVITY_OBJECT_KIND_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_ACTIVITY_FLAG_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_EXTERNAL_CORRELATION_KIND_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_ACTIVITY_ATTRIBUTE_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_THREAD_ID_TYPE_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_CALLBACK_DOMAIN_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_RUNTIME_CBID_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_DRIVER_CBID_VALUES(VALUE_CHECK)
CUPTIMON_CUPTI_MACRO_VALUES(VALUE_CHECK)

/* CUPTI's enum types are int-sized (each ends in a FORCE_INT member), and
 * so are the project's: parameters of those types pass the same way. */
#define TYPED_CHECK(type)                                                                          \
    _Static_assert(sizeof(type) == 4, #type " is int-sized in the CUPTI headers");
CUPTIMON_CUPTI_ENUM_TYPES(TYPED_CHECK)

/* The record header. */
#define STRUCT_CHECK(type, size, align)                                                            \
    _Static_assert(sizeof(type) == (size) && _Alignof(type) == (align),                            \
                   "proto/cupti-abi.h: " #type "'s size or alignment differs from CUPTI's");
#define FIELD_CHECK(type, member, off, size)                                                       \
    _Static_assert(offsetof(type, member) == (off) && sizeof(((type *)0)->member) == (size),       \
                   "proto/cupti-abi.h: " #type "." #member " differs from CUPTI's");
CUPTIMON_CUPTI_STRUCTS(STRUCT_CHECK, FIELD_CHECK)

/* Callback types: a typedef may be repeated only with the same type. */
#define CALLBACK_CHECK(ret, name, params) typedef ret(CUPTIAPI *name) params;
CUPTIMON_CUPTI_CALLBACK_TYPES(CALLBACK_CHECK)

/* Entry points: a redeclaration must be compatible with CUPTI's. */
#define FUNCTION_CHECK(ret, name, params) ret CUPTIAPI name params;
CUPTIMON_CUPTI_FUNCTIONS(FUNCTION_CHECK)

/* CUPTI 13.2+ (multiple subscribers, user-defined records): the headers
 * of 13.3 and later have all of it, 13.4 and later pKindOptions too.  With
 * older headers (the CUDA 13.0 toolkit this project is built with today)
 * these lists are not compared here: proto/cupti-abi.h asserts the sizes
 * the reference gives, and the test says in its log what was not checked. */
#if CUPTI_API_VERSION >= 130300
#define V2_CHECKED 1
CUPTIMON_CUPTI_V2_ATTRIBUTE_VALUES(VALUE_CHECK)
#define FIELD_ENUM_CHECK(type, list)                                                               \
    _Static_assert(sizeof(type) == 4, #type " is int-sized");                                      \
    list(VALUE_CHECK)
CUPTIMON_CUPTI_V2_FIELD_ENUMS(FIELD_ENUM_CHECK)
CUPTIMON_CUPTI_V2_STRUCTS(STRUCT_CHECK, FIELD_CHECK)
CUPTIMON_CUPTI_V2_CALLBACK_TYPES(CALLBACK_CHECK)
CUPTIMON_CUPTI_V2_FUNCTIONS(FUNCTION_CHECK)
#else
#define V2_CHECKED 0
#endif
#if CUPTI_API_VERSION >= 130400
#define V2_134_CHECKED 1
CUPTIMON_CUPTI_V2_134_STRUCTS(STRUCT_CHECK, FIELD_CHECK)
#else
#define V2_134_CHECKED 0
#endif

struct entry {
    const char *name;
    long long listed, cupti;
};

#define ENTRY(name, value) {#name, (long long)(value), (long long)(name)},
static const struct entry entries[] = {
    CUPTIMON_CUPTI_RESULT_VALUES(ENTRY) CUPTIMON_CUPTI_ACTIVITY_KIND_VALUES(ENTRY)
        CUPTIMON_CUPTI_ACTIVITY_OBJECT_KIND_VALUES(ENTRY) CUPTIMON_CUPTI_ACTIVITY_FLAG_VALUES(ENTRY)
            CUPTIMON_CUPTI_EXTERNAL_CORRELATION_KIND_VALUES(ENTRY)
                CUPTIMON_CUPTI_ACTIVITY_ATTRIBUTE_VALUES(ENTRY)
                    CUPTIMON_CUPTI_THREAD_ID_TYPE_VALUES(ENTRY)
                        CUPTIMON_CUPTI_CALLBACK_DOMAIN_VALUES(ENTRY)
                            CUPTIMON_CUPTI_RUNTIME_CBID_VALUES(ENTRY)
                                CUPTIMON_CUPTI_DRIVER_CBID_VALUES(ENTRY)
                                    CUPTIMON_CUPTI_MACRO_VALUES(ENTRY)};

#define NAME(ret, name, params) #name,
static const char *const functions[] = {CUPTIMON_CUPTI_FUNCTIONS(NAME)
                                            CUPTIMON_CUPTI_V2_FUNCTIONS(NAME)};
/* The first ones are compared with every toolkit's headers, the _v2 ones
 * with 13.3+ headers only (V2_CHECKED). */
#define BASE_FUNCTIONS                                                                             \
    (sizeof((const char *const[]){CUPTIMON_CUPTI_FUNCTIONS(NAME)}) / sizeof(char *))

START_TEST(values_match)
{
    printf("proto/cupti-abi.h against CUPTI API version %d's headers\n", (int)CUPTI_API_VERSION);
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        printf("  %-58s %lld\n", entries[i].name, entries[i].cupti);
        ck_assert_msg(entries[i].listed == entries[i].cupti, "%s: cupti-abi.h %lld, CUPTI %lld",
                      entries[i].name, entries[i].listed, entries[i].cupti);
    }
    /* The kinds the layout table indexes are the same numbers. */
    ck_assert_int_eq(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 10);
}
END_TEST

START_TEST(entry_points_declared)
{
    /* Every prototype above compiled against CUPTI's; list them, and check
     * that the shim's dlsym names are among them (a name it resolves but
     * the list lacks would be called through an unchecked type). */
    static const char *const resolved[] = {
        "cuptiGetVersion", "cuptiGetResultString", "cuptiActivityRegisterCallbacks",
        "cuptiActivityEnable", "cuptiActivityDisable", "cuptiActivityFlushAll",
        "cuptiActivityGetNextRecord", "cuptiActivityGetNumDroppedRecords",
        "cuptiActivitySetAttribute", "cuptiGetTimestamp", "cuptiActivityPushExternalCorrelationId",
        "cuptiActivityPopExternalCorrelationId", "cuptiActivityEnableRuntimeApi",
        "cuptiActivityEnableDriverApi", "cuptiSetThreadIdType",
        "cuptiActivityRegisterTimestampCallback", "cuptiFinalize",
        /* the v2 path (client-lib/v2.c) */
        "cuptiSubscribe_v2", "cuptiUnsubscribe", "cuptiActivitySetAttribute_v2",
        "cuptiActivityGetAttribute_v2", "cuptiActivityRegisterCallbacks_v2",
        "cuptiActivityEnable_v2", "cuptiActivityDisable_v2", "cuptiActivityGetNextRecord_v2",
        "cuptiActivityGetNumDroppedRecords_v2", "cuptiGetTimestamp_v2",
        "cuptiActivityPushExternalCorrelationId_v2", "cuptiActivityPopExternalCorrelationId_v2",
        "cuptiActivityEnableRuntimeApi_v2", "cuptiActivityEnableDriverApi_v2"};
    for (size_t i = 0; i < sizeof resolved / sizeof resolved[0]; i++) {
        int found = 0;
        for (size_t j = 0; j < sizeof functions / sizeof functions[0]; j++)
            found |= strcmp(resolved[i], functions[j]) == 0;
        ck_assert_msg(found, "%s is not in CUPTIMON_CUPTI_FUNCTIONS", resolved[i]);
    }
    for (size_t j = 0; j < sizeof functions / sizeof functions[0]; j++)
        printf("  prototype %s: %s\n",
               j < BASE_FUNCTIONS || V2_CHECKED ? "checked"
                                                : "declared, not checked (headers < 13.3)",
               functions[j]);
}
END_TEST

START_TEST(v2_checked_or_said)
{
    /* The 13.2+ lists compile against 13.3+ headers only; with older ones
     * the log says so, so that a run on a 13.3 toolkit is seen to matter. */
    if (V2_CHECKED)
        printf("CUPTI 13.2+ lists (attributes 11-23, field ids, structs, _v2 prototypes) "
               "checked against CUPTI API version %d\n",
               (int)CUPTI_API_VERSION);
    else
        printf("CUPTI 13.2+ lists NOT checked: the headers are CUPTI API version %d, older than "
               "130300; proto/cupti-abi.h asserts the reference's sizes instead\n",
               (int)CUPTI_API_VERSION);
    if (!V2_134_CHECKED)
        printf("CUPTI 13.4 lists (pKindOptions, CUpti_ActivityApi*Options) NOT checked: headers "
               "older than 130400\n");
    ck_assert(V2_CHECKED || CUPTI_API_VERSION < 130300);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("cupti-abi");
    TCase *t = tcase_create("abi");
    tcase_add_test(t, values_match);
    tcase_add_test(t, entry_points_declared);
    tcase_add_test(t, v2_checked_or_said);
    suite_add_tcase(s, t);
    return s;
}
