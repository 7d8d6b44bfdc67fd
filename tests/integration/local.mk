# Integration tests: the real cuptimond, cuptimonctl and shim, driven by
# shell scripts, with the libcupti test double standing in for CUPTI.
INTEGRATION_TESTS = tests/integration/cli.sh tests/integration/systemd.sh tests/integration/multi-producer.sh tests/integration/versions.sh \
	tests/integration/no-daemon.sh tests/integration/preload.sh \
	tests/integration/authz-windows.sh \
	tests/integration/window-ids.sh \
	tests/integration/daemon-killed.sh tests/integration/producer-killed.sh \
	tests/integration/windows.sh tests/integration/coexist.sh tests/integration/authz.sh \
	tests/integration/service.sh tests/integration/kineto.sh tests/integration/nvtx.sh \
	tests/integration/ranks.sh tests/integration/decode-select.sh tests/integration/window-gz.sh \
	tests/integration/annotations.sh \
	tests/integration/decode-range.sh \
	tests/integration/user-defined.sh tests/integration/layouts.sh \
	tests/integration/edges.sh tests/integration/held.sh tests/integration/gpu-metrics.sh \
	tests/integration/v2.sh \
	tests/integration/v2-old-daemon.sh
TESTS += $(INTEGRATION_TESTS)
EXTRA_DIST += $(INTEGRATION_TESTS) tests/integration/check-archive.py tests/integration/kineto-check.py
# cuptimonctl stats and the demo's end (issue 29): their own line, so that
# lists growing above merge without a conflict.
INTEGRATION_TESTS += tests/integration/stats.sh tests/integration/demo-end.sh
# What flush and top say while a running kernel holds the records (issue
# 47): their own line.
INTEGRATION_TESTS += tests/integration/held-commands.sh
# cuptimonctl export --type sqlite (issue 50): its own line, as above.
INTEGRATION_TESTS += tests/integration/export.sh
# The pool's limits (issue 47): their own line, for the merge.
INTEGRATION_TESTS += tests/integration/pool-limits.sh

# The GPU metrics' own cost and the operator's commands (issue 48).
INTEGRATION_TESTS += tests/integration/gpu-metrics-cost.sh

# NCCL's collectives through the shim as NCCL's profiler plugin (issue 46).
INTEGRATION_TESTS += tests/integration/nccl.sh
# NCCL 2.23-2.27's plugin versions 1-3 through the shim (issue 46): its own line.
INTEGRATION_TESTS += tests/integration/nccl-old.sh
