/*
 * fakepm.h: libpm-fake.so, the test double of CUPTI's PM Sampling API and the CUDA driver
 * calls around it, for the daemon's GPU metrics sampler (daemon/gpm.c, issue 34).
 *
 * There is no GPU in CI.  The daemon dlopens a libcupti and a libcuda from paths it is
 * given and calls the entry points of daemon/gpm-cupti.h; tests give it this library for
 * both.  It exports exactly those, with the prototypes of the real headers of CUDA 13.0
 * (cupti_pmsampling.h, cupti_profiler_host.h, cupti_profiler_target.h, cupti_target.h,
 * cuda.h; fakepm.c includes them, so the compiler checks every signature):
 *   cuInit cuDriverGetVersion cuDeviceGetCount cuDeviceGet cuDeviceGetName
 *   cuDeviceGetUuid cuDeviceGetUuid_v2 cuDeviceGetPCIBusId
 *   cuptiGetResultString cuptiGetTimestamp
 *   cuptiProfilerInitialize cuptiProfilerDeInitialize cuptiDeviceGetChipName
 *   cuptiProfilerHost{Initialize,Deinitialize,ConfigAddMetrics,GetConfigImageSize,
 *                     GetConfigImage,GetNumOfPasses,EvaluateToGpuValues}
 *   cuptiPmSampling{Enable,Disable,SetConfig,Start,Stop,GetCounterAvailability,
 *                   GetCounterDataSize,CounterDataImageInitialize,DecodeData,
 *                   GetCounterDataInfo,CounterDataGetSampleInfo}
 * and, for its own unit test only, fakepm_reset() below.  Give the daemon the same file
 * (or a symlink to it) for libcupti and libcuda: the dynamic loader then loads it once and
 * both halves share one state; two copies would be two libraries, and the CUPTI half would
 * never see the cuInit.
 *
 * The model follows what an H200 (CUDA 13.0, driver 580) showed and what the headers
 * document (docs/reference-pmsampling.md):
 *
 * Order.  cuInit(0) comes first: without it cuptiProfilerInitialize returns
 *   CUPTI_ERROR_UNKNOWN (the real one returns that or crashes).  cuptiProfilerInitialize
 *   (counted: each needs a cuptiProfilerDeInitialize) comes before every target-side call
 *   (DeviceGetChipName, GetCounterAvailability, Enable): without it they return
 *   CUPTI_ERROR_NOT_INITIALIZED, where the real CUPTI crashes.  Misuse that the real library
 *   would crash on, and caller bugs (NULL params, a structSize below the header's
 *   CUPTI_PROFILER_STRUCT_SIZE), are also said on stderr ("fakepm[PID]: ...").  The host
 *   API (cuptiProfilerHost*) needs neither, as the real one needs no driver.  No CUDA
 *   context is needed and none exists.  The last cuptiProfilerDeInitialize disables what
 *   is still enabled.  Every handle is looked up before use: a stale or made-up object or
 *   host object gets CUPTI_ERROR_INVALID_PARAMETER, never a crash.
 *
 * Params.  NULL params, or a structSize smaller than CUPTI_PROFILER_STRUCT_SIZE of the
 *   struct's last member in CUDA 13.0: CUPTI_ERROR_INVALID_PARAMETER.  Larger is accepted.
 *   A deviceIndex past the last device: CUPTI_ERROR_INVALID_PARAMETER.
 *
 * Devices.  FAKEPM_DEVICES (default 1) devices, fixed at the first successful cuInit; the
 *   CUPTI deviceIndex is the CUDA ordinal.  Each is an "NVIDIA H200", chip "GH100", PCI
 *   bus id "0000:BB:00.0" (BB = 19 3B 4C 5D 9B BB CB DB for ordinals 0-7, E0+N after),
 *   UUID fa4e0000-0000-4000-8000-0000000000NN (NN the ordinal in hex).  Before cuInit the
 *   cuDevice* calls return CUDA_ERROR_NOT_INITIALIZED (3); a bad ordinal
 *   CUDA_ERROR_INVALID_DEVICE (101); cuDriverGetVersion works without cuInit (13000).
 *
 * Host API.  cuptiProfilerHostInitialize takes CUPTI_PROFILER_TYPE_PM_SAMPLING only
 *   (else CUPTI_ERROR_NOT_SUPPORTED), a chip of CUPTI 13.0's list (GV100 ... GH100 ...
 *   GB20B) or any chip with that chip's availability image.  ConfigAddMetrics adds a set
 *   (duplicates collapse), all of a call's names or none: a name not in the table below is
 *   CUPTI_ERROR_INVALID_PARAMETER; with a device's availability image that has no NVLink
 *   (a single-GPU node, the default) nvlrx__ and nvltx__ metrics are CUPTI_ERROR_UNKNOWN
 *   (without an image, offline, they are accepted).  GetConfigImageSize/GetConfigImage
 *   before any metric was added: CUPTI_ERROR_INVALID_OPERATION.  The config image is opaque
 *   (magic, chip, the metric names, number of passes, checksum); a damaged or foreign one is
 *   CUPTI_ERROR_INVALID_PARAMETER wherever it is passed.  GetNumOfPasses:
 *   max(ceil(metrics / FAKEPM_METRICS_PER_PASS), the largest "alone" count of the table)
 *   (1 pass for up to 22 metrics of the one-pass kind).
 *
 * PM sampling.
 *   GetCounterAvailability(device): size query with a NULL image (256 bytes), then the
 *     image (chip, NVLink or not).  Checked at every call, size query included, in this
 *     order: privileges (FAKEPM_ADMIN_ONLY) -> CUPTI_ERROR_INSUFFICIENT_PRIVILEGES; the
 *     device busy -> CUPTI_ERROR_HARDWARE_BUSY (FAKEPM_BUSY_FILE exists; this process has
 *     configured sampling on it; another process holds its lock in FAKEPM_DIR).
 *   Enable(device) -> the object; CUPTI_ERROR_INVALID_OPERATION if this process has it
 *     enabled already.  Another process's Enable succeeds: it is SetConfig and
 *     GetCounterAvailability that find the device busy (as measured).
 *   SetConfig: CUPTI_ERROR_INVALID_OPERATION while started; INVALID_PARAMETER for a bad
 *     config image, one for another chip, a bad trigger or append mode, interval 0, or a
 *     hardwareBufferSize below one sample; CUPTI_ERROR_NOT_SUPPORTED for a multi-pass image;
 *     then the privilege and busy checks above (INSUFFICIENT_PRIVILEGES, HARDWARE_BUSY).
 *     Success reserves the device (its lock file, with FAKEPM_DIR) until Disable and
 *     empties the hardware buffer.  The interval is in ns (GPU_TIME_INTERVAL) or SYS clock
 *     cycles at FAKEPM_SYSCLK_HZ (GPU_SYSCLK_INTERVAL).  The hardware buffer holds
 *     hardwareBufferSize / FAKEPM_HW_SAMPLE_BYTES samples (1024 bytes each by default).
 *   GetCounterDataSize(metrics, maxSamples): unknown names INVALID_PARAMETER; the size of an
 *     image of maxSamples samples.  CounterDataImageInitialize (after it, else
 *     INVALID_OPERATION; counterDataSize at least that size) formats an empty image of those
 *     metrics for this object.  Initializing again, or copying back a pristine copy, empties
 *     it.
 *   Start (after SetConfig; not twice: INVALID_OPERATION) at time T, interval I: sample 0
 *     spans [T - FAKEPM_FIRST_SAMPLE_LEAD_NS, T + I) (the H200's first sample began 0.4 to
 *     1.3 s before Start; default lead 0.8 s), sample i >= 1 spans [T + iI, T + (i+1)I).
 *     A sample is completed, and enters the hardware buffer, once the clock passes its end;
 *     timestamps are on the double's clock, CLOCK_REALTIME ns by default (as the H200's and
 *     cuptiGetTimestamp's).  Samples are exact: no jitter.
 *   The hardware buffer full: KEEP_LATEST drops the oldest samples, and the next DecodeData
 *     reports overflow=1 (once).  KEEP_OLDEST drops the new ones and, as the H200 did
 *     (docs/gpu-runs/20261205-h200-pm-probe, item 5), every DecodeData from then on returns
 *     CUPTI_ERROR_OUT_OF_MEMORY with overflow=1 and decodes nothing, until Start begins a
 *     new run (Start empties the hardware buffer: assumed, not seen on the H200; the
 *     daemon disables and enables the device, which starts afresh either way).  FAKEPM_OVERFLOW_RESULT=oom: what the
 *     header documents instead, OUT_OF_MEMORY and overflow=1 once, having decoded what was
 *     kept, sampling going on once a decode makes room (a gap in the timestamps);
 *     =success: the same with CUPTI_SUCCESS.
 *   DecodeData (after SetConfig, else INVALID_OPERATION; an image of this object whose
 *     metrics the config has, else INVALID_PARAMETER) moves completed samples, oldest first,
 *     into the image until it is full: decodeStopReason COUNTER_DATA_FULL if samples are
 *     still pending, else END_OF_RECORDS (also when none were).  Values are computed then.
 *   GetCounterDataInfo: numTotalSamples = maxSamples, numPopulatedSamples =
 *     numCompletedSamples = samples in the image.  GetSampleInfo(i < populated; a live
 *     object) gives the sample's start and end.  EvaluateToGpuValues(rangeIndex <
 *     completed) gives the values; a name not in the image is
 *     CUPTI_ERROR_INVALID_METRIC_NAME.
 *   Stop (INVALID_OPERATION when not started): the sample in progress is never completed;
 *     the completed ones stay decodable until END_OF_RECORDS.  Start again begins a new
 *     run (with the lead again).  Disable (works started or not) frees the object and
 *     releases the device.  A busy condition that appears while a process samples (the
 *     busy file created, say) does not disturb it: only later SetConfig and
 *     GetCounterAvailability calls see it.
 *
 * Values.  Each metric reports a signal: a step function of time that is its idle value
 *   (table) unless a phase sets it.  A sample's value is the signal's time-weighted mean
 *   over the sample's span (percentages, rates); a .sum metric is the integral of its
 *   .per_second signal over the span (rate x seconds).  So a sample inside one phase reads
 *   exactly the phase's value, and one across a boundary the weighted mix.
 *
 *   metric (passes alone; idle value)                                 kind
 *   sm__cycles_active.avg.pct_of_peak_sustained_elapsed (1; 0.5)           %
 *   sm__warps_active.avg.pct_of_peak_sustained_elapsed (1; 0.25)           %
 *   sm__warps_active_realtime.avg.pct_of_peak_sustained_elapsed (1; 0.3)   %
 *   sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed (1; 0.01)           %
 *   sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed (1; 0.02)  %
 *   TPC.TriageCompute.sm__pipe_tensor_op_hmma_cycles_active_realtime
 *       .avg.pct_of_peak_sustained_elapsed (1; 0.03)                      %
 *   sm__pipe_shared_cycles_active_realtime.avg.pct... (1; 0.04)             %
 *   sm__pipe_alu_cycles_active.avg.pct... (1; 0.05), sm__pipe_fma_cycles_active (1; 0.06),
 *   sm__inst_executed_realtime (1; 0.07), sm__pipe_fp64_cycles_active (2; 0.08),
 *   sm__throughput (19; 0.9), lts__throughput (4; 0.8)                      % (.avg.pct...)
 *   dram__throughput (1; 1.5), dramc__throughput (1; 1.5), dramc__read_throughput (1; 1.0),
 *   dramc__write_throughput (1; 0.5), pcie__throughput (1; 0.1)             % (.avg.pct...)
 *   gr__cycles_active.avg.pct_of_peak_sustained_elapsed (1; 2.0)            %
 *   gr__cycles_active.sum.pct_of_peak_sustained_elapsed: the same signal   %
 *   dram__bytes_read.sum.per_second (1; 4.8e10), dram__bytes_write... (1; 2.4e10)    B/s
 *   pcie__read_bytes.sum.per_second (1; 1e6), pcie__write_bytes... (1; 2e6)          B/s
 *   nvlrx__bytes.sum.per_second, nvltx__bytes.sum.per_second (1; 0; NVLink)          B/s
 *   lts__t_bytes.sum.per_second (1; 1e11)                                             B/s
 *   gpc__cycles_elapsed.avg.per_second, sm__cycles_elapsed.avg.per_second (1; 1.98e9) Hz
 *   sys__cycles_elapsed.avg.per_second (1; 1.6e9)                                     Hz
 *   dram__bytes_read.sum, dram__bytes_write.sum, pcie__read_bytes.sum,
 *   pcie__write_bytes.sum, nvlrx__bytes.sum, nvltx__bytes.sum: bytes per sample (SUM)
 *
 *   Phases: FAKEPM_PHASES (entries separated by ';' or newlines) and then the lines of the
 *   file FAKEPM_PHASES_FILE, re-read at every DecodeData (so a test may write it while the
 *   daemon runs; values are computed at decode, from the script as it is then).  Entry:
 *     START_NS END_NS [PRESET ...] [METRIC=VALUE ...]      (# starts a comment line)
 *   on the double's clock, the phase covering [START, END) ("-" for an open end).  PRESET
 *   is idle (every signal at its idle value), stream (dram__throughput 85, DRAM read 2.72e12
 *   and write 1.36e12 B/s, SM active 98, warps 45, tensor 0, gr 100, ...), gemm (tensor
 *   and tensor_realtime 94, hmma 0, SM 99, warps 12, dram__throughput 25, gr 100, ...),
 *   wmma (tensor 60, hmma 60, ...), h2d (pcie__read_bytes 5e10 B/s, pcie__throughput 80,
 *   SM and gr 0), d2h (pcie__write_bytes 5e10 B/s, ...): fakepm.c's presets[] has them all.
 *   METRIC=VALUE sets a percent or rate metric (not a .sum or the gr alias); percentages
 *   are clamped to 0..100.  Where phases overlap, the later one's setting wins; what no
 *   phase sets keeps its idle value.  Mistakes are said on stderr, once per new script.
 *
 * Clock.  FAKEPM_CLOCK: unset or "real": CLOCK_REALTIME; a number: that time in ns, fixed
 *   (a test setenv()s a new one to step time); "@PATH": the number in file PATH, read at
 *   every call (a test process steps the clock of a daemon; write it with a rename, and
 *   an unreadable file leaves the clock where it was last read).  cuptiGetTimestamp and
 *   every sample time use it.  Only the clock of the samples is virtual: a daemon's own
 *   timers still run in real time.
 *
 * Busy and privileges (re-read at every SetConfig and GetCounterAvailability):
 *   FAKEPM_BUSY_FILE=PATH   while PATH exists, "another profiler holds the device"
 *                           (ncu, DCGM): HARDWARE_BUSY for every device, or only the
 *                           ordinals listed in it (whitespace or comma separated).
 *   FAKEPM_DIR=DIR          cross-process exclusion: SetConfig takes an exclusive flock on
 *                           DIR/pm-devN.lock until Disable (or exit); other processes then
 *                           get HARDWARE_BUSY from SetConfig and GetCounterAvailability on
 *                           device N.  Unset: per process only.  (A child forked without
 *                           exec keeps a parent's lock while it lives.)
 *   FAKEPM_ADMIN_ONLY=1     RmProfilingAdminOnly=1: INSUFFICIENT_PRIVILEGES from SetConfig
 *                           and GetCounterAvailability unless the euid is 0; =all: even
 *                           for root (tests run as root).
 *
 * Other knobs (read when they matter, so a test may setenv() between calls):
 *   FAKEPM_DEVICES=N               devices (0..16, default 1); 0: cuInit returns
 *                                  CUDA_ERROR_NO_DEVICE (100).
 *   FAKEPM_CUINIT_RESULT=N         cuInit returns CUresult N (a broken driver).
 *   FAKEPM_CHIP=NAME               the chip name (default GH100).
 *   FAKEPM_DEVICE_NAME=NAME        cuDeviceGetName (default "NVIDIA H200").
 *   FAKEPM_DRIVER_VERSION=N        cuDriverGetVersion (default 13000).
 *   FAKEPM_NVLINK=1                the devices have NVLink: nvlrx/nvltx metrics available.
 *   FAKEPM_METRICS_PER_PASS=N      metrics per pass (default 22).
 *   FAKEPM_FIRST_SAMPLE_LEAD_NS=N  how long before Start the first sample begins
 *                                  (default 800000000; 0: the first sample is like the rest).
 *   FAKEPM_HW_SAMPLE_BYTES=N       hardware buffer bytes per sample (default 1024).
 *   FAKEPM_SYSCLK_HZ=N             SYS clock for GPU_SYSCLK_INTERVAL (default 1.6e9).
 *   FAKEPM_OVERFLOW_RESULT=R       wedge (default, the H200), oom or success: what a
 *                                  KEEP_OLDEST overflow does to DecodeData (above).
 *   FAKEPM_MIN_HW_BUFFER=N         a KEEP_OLDEST run whose hardwareBufferSize is under N
 *                                  bytes is wedged from Start on, as the H100's 32 MiB
 *                                  buffer was under a memory-bound load at 10 and 100 ms
 *                                  (docs/gpu-runs/20261205-h100-held-pm-edges) (default 0:
 *                                  none).
 *   FAKEPM_HW_FILL_BPS=N           a KEEP_OLDEST run's hardware buffer also fills with N
 *                                  bytes a second, whatever the interval, and each DecodeData
 *                                  empties it; full, it overflows as above.  An H100 under a
 *                                  memory-bound load filled 64 MiB within 0.5 s at 10 ms,
 *                                  100 ms and 1 s, never within 0.2 s, and 128 MiB within 1 s
 *                                  (docs/gpu-runs/20261206-h100-suite-pm-overflow) (default 0).
 *   FAKEPM_FLOOD_BPS=N             a configuration that holds the non-realtime tensor pipe
 *                                  counter with SM active or warps active also fills the
 *                                  hardware buffer with N bytes a second (added to
 *                                  FAKEPM_HW_FILL_BPS): the records besides the triggered
 *                                  samples that made the H100 decode such a set at half a core
 *                                  (docs/gpu-runs/20261207-h100-sandbox-pm-cost); any other
 *                                  set, none (default 0).
 *   FAKEPM_DECODE_NS_PER_MIB=N     DecodeData spends N ns of the caller's thread CPU per MiB
 *                                  of raw records it reads (the fill and the samples since the
 *                                  last decode), as cuptiPmSamplingDecodeData does (default 0).
 *   The Perf SDK's NVPW_GetDeviceCount, NVPW_Device_GetPciBusIds (its device order the
 *   reverse of CUDA's) and NVPW_GPU_PeriodicSampler_GetRecordBufferStatus (the hardware
 *   buffer's used bytes: those two fills and the samples it holds) are exported too: real
 *   libcupti samples through libnvperf_host's periodic sampler.
 *   FAKEPM_DECODE_FAIL_AT=N        the Nth DecodeData of the process (from 1) returns
 *                                  CUPTI_ERROR_INVALID_PARAMETER and moves nothing, as one did
 *                                  on the H100 1.4 s into a memory-bound phase, just before
 *                                  two overflows (docs/gpu-runs/20261206-h100-pm-bench;
 *                                  likely the buffer filling, FAKEPM_HW_FILL_BPS)
 *                                  (default 0: none).
 *   FAKEPM_LOG=1                   every call and its result on stderr ("fakepm[PID]: ").
 *
 * Threads: one lock serializes every call.  Not modelled: contexts, MIG/vGPU, jitter in
 * the sample period, a partially populated sample, the real images' sizes and bytes.
 */
#ifndef CUPTIMON_FAKEPM_H
#define CUPTIMON_FAKEPM_H

/* Forgets all state (objects, host objects, cuInit, cuptiProfilerInitialize), releases
 * every device lock: each unit test starts from here, also without fork. */
void fakepm_reset(void);

#endif
