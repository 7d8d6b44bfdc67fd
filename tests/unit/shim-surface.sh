#!/bin/bash
# What libcuptimon.so shows the process it is loaded into: it needs nothing
# but libc (json-c is linked in, hidden, unless configured with
# --disable-shim-static-json-c), and it exports only its API, the driver's
# injection hook and the six CUPTI activity entry points it shares.  A
# symbol that leaks (json-c's, say) would bind the job's own calls to the
# shim's copy.
set -u
SO=$top_builddir/client-lib/.libs/libcuptimon.so
fail() { echo "FAIL: $*"; exit 1; }
command -v readelf >/dev/null || { echo "SKIP: no readelf (binutils)"; exit 77; }
[ -f "$SO" ] || fail "no $SO"
needed=$(readelf -dW "$SO" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "NEEDED: $needed"
if [ "${SHIM_STATIC_JSONC:-1}" = 1 ]; then
    for n in $needed; do
        case $n in
        libc.so.*|libdl.so.*|libpthread.so.*|libm.so.*|ld-linux*) ;;
        # a sanitizer build's runtimes
        libasan.so.*|libubsan.so.*|liblsan.so.*|libtsan.so.*|libgcc_s.so.*|libstdc++.so.*) ;;
        *) fail "the shim needs $n at run time (only libc expected)" ;;
        esac
    done
fi
exports=$(readelf -W --dyn-syms "$SO" | awk '$1 ~ /^[0-9]+:$/ && $5 != "LOCAL" && $7 != "UND" && $8 != "" {print $8}' \
    | sed 's/@.*//' | sort -u)
echo "exports: $(echo "$exports" | tr '\n' ' ')"
bad=$(echo "$exports" | grep -vE '^(cuptimon_[a-z_]+|InitializeInjection|cuptiActivityRegisterCallbacks|cuptiActivityEnable|cuptiActivityDisable|cuptiActivityFlushAll|cuptiActivityRegisterTimestampCallback|cuptiFinalize|ncclProfiler_v[1-6])$' || true)
[ -z "$bad" ] || fail "the shim exports symbols beyond its API: $(echo "$bad" | tr '\n' ' ')"
for s in cuptimon_init InitializeInjection cuptiActivityRegisterCallbacks cuptiFinalize ncclProfiler_v6 ncclProfiler_v1; do
    echo "$exports" | grep -qx "$s" || fail "the shim does not export $s"
done
echo "ok"
