/*
 * fakecupti-nov2.c: the hooks of fakecupti-v2.c without the v2 API, for a
 * variant of the double that exports none of CUPTI 13.2+'s _v2 entry
 * points (tests/fakecupti/nov2/libcupti-fake.so: a libcupti that reports
 * 13.3 but lacks them, for the shim's fallback).  The process stays on the
 * global activity API.
 */
#include "config.h"

#include "fakecupti-int.h"

int fc_api_mode(void)
{
    return 0;
}

CUptiResult fc_v1_gate(int uses_activity)
{
    (void)uses_activity;
    return CUPTI_SUCCESS;
}

int fc_v2_api_on_locked(CUpti_ActivityKind kind, CUpti_CallbackId cbid)
{
    (void)kind;
    (void)cbid;
    return 0;
}

int fc_v2_put_locked(const void *rec, size_t sz)
{
    (void)rec;
    (void)sz;
    return 0;
}

uint32_t fc_v2_ext_locked(uint32_t corr, CUpti_CallbackId rt_cbid, CUpti_CallbackId drv_cbid)
{
    (void)corr;
    (void)rt_cbid;
    (void)drv_cbid;
    return 0;
}

void fc_v2_flush_locked(uint32_t flag)
{
    (void)flag;
}

void fc_v2_deliver(int sub, uint8_t *base, size_t size, size_t valid, size_t nrec, uint32_t tid)
{
    (void)sub;
    (void)base;
    (void)size;
    (void)valid;
    (void)nrec;
    (void)tid;
}

int fc_v2_callbacks_registered(void)
{
    return 0;
}

void fc_v2_reset(void)
{
}
