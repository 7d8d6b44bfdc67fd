/*
 * fakecupti-int.h: what the two halves of the libcupti test double share.
 * fakecupti.c is CUPTI's global (v1) activity API and the fake GPU;
 * fakecupti-v2.c is CUPTI 13.2+'s multi-subscriber (_v2) API with
 * user-defined records.  Nothing here is exported from the library.
 *
 * Locking is fakecupti.c's: one recursive mutex (fc_lock/fc_unlock) over
 * all state; the *_locked functions expect it held.
 */
#ifndef CUPTIMON_FAKECUPTI_INT_H
#define CUPTIMON_FAKECUPTI_INT_H

#include <stddef.h>
#include <stdint.h>
#include <cupti.h>

/* ---- fakecupti.c, for fakecupti-v2.c ---- */

void fc_lock(void);
void fc_unlock(void);
/* CUPTI's clock (CLOCK_REALTIME, or the registered timestamp callback's). */
uint64_t fc_now(void);
/* The CUPTI API version the double reports (FAKECUPTI_VERSION). */
uint32_t fc_api_version(void);
/* The size of the predefined record the double writes for a kind (0: a
 * kind it never writes). */
size_t fc_record_size(uint32_t kind);
/* Turns the kind on or off for the fake GPU's launches (the union of the
 * subscribers' kinds in multi-subscriber mode). */
void fc_enabled_set_locked(uint32_t kind, int on);
/* Hands a buffer to the completion thread; sub is the subscriber's index
 * + 1 (fakecupti-v2.c's fc_v2_deliver completes it). */
void fc_v2_enqueue_locked(uint8_t *base, size_t size, size_t valid, size_t nrec, int sub,
                          uint32_t tid);
/* Waits, lock held once, until every buffer queued so far was completed. */
void fc_wait_all_locked(void);
/* The calling thread is inside a CUPTI callback (flushing from it is
 * refused): +1 on entry, -1 on return. */
void fc_in_callback(int delta);
/* The double's statistics (the first subscriber's records, in
 * multi-subscriber mode). */
struct fakecupti_stats *fc_stats_locked(void);

/* ---- fakecupti-v2.c, for fakecupti.c's hooks ---- */

/* Which activity API the process uses: 0 none yet, 1 the global (v1)
 * activity API, 2 a _v2 subscriber.  CUPTI does not let them mix. */
int fc_api_mode(void);
/* A v1 activity call: CUPTI_SUCCESS, or the error CUPTI returns once a
 * subscriber-scope call was made (NOT_COMPATIBLE, or for registering
 * callbacks and enabling kinds MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
 * uses_activity: the call makes the process a v1 activity client. */
CUptiResult fc_v1_gate(int uses_activity);
/* Multi-subscriber mode: is the API record of this cbid wanted by any
 * subscriber? */
int fc_v2_api_on_locked(CUpti_ActivityKind kind, CUpti_CallbackId cbid);
/* Multi-subscriber mode: writes a predefined record (as the fake GPU made
 * it, sz bytes) into the buffer of every subscriber that enabled its kind,
 * in that subscriber's field selection.  Returns 1 when the first
 * subscriber got it. */
int fc_v2_put_locked(const void *rec, size_t sz);
/* Multi-subscriber mode: the external correlation records of a launch,
 * one per external kind with an id pushed, per subscriber (its own
 * stacks), for subscribers that trace the launch's runtime or driver
 * call.  Returns FAKECUDA_REC_EXTCORR bits for the first subscriber. */
uint32_t fc_v2_ext_locked(uint32_t corr, CUpti_CallbackId rt_cbid, CUpti_CallbackId drv_cbid);
/* cuptiActivityFlushAll in multi-subscriber mode: queues every
 * subscriber's buffers (flag 0: those whose records have all completed). */
void fc_v2_flush_locked(uint32_t flag);
/* The completion thread's delivery of a subscriber's buffer. */
void fc_v2_deliver(int sub, uint8_t *base, size_t size, size_t valid, size_t nrec, uint32_t tid);
/* The first subscriber has its buffer callbacks registered. */
int fc_v2_callbacks_registered(void);
/* fakecupti_reset: back to no subscriber and no API mode. */
void fc_v2_reset(void);

#endif
