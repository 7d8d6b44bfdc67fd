#!/bin/bash
# The configuration file, reload, and retention: a bad file is refused with
# the key and value named; --check-config shows what would run; SIGHUP and
# `cuptimonctl reload` re-read it and keep the old one when the new is bad;
# with a byte cap the archive stays under it (plus the live segments) while
# producers keep writing.
. "$top_srcdir/tests/integration/lib.sh"

echo '{"flush_period_s": -1}' > "$T/bad.conf"
set +e
out=$("$CUPTIMOND" --config "$T/bad.conf" --check-config 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "flush_period_s" && echo "$out" | grep -q -- "-1" \
    || fail "a bad config was not refused with the key and value: $rc $out"
echo '{"flush_perod_s": 1}' > "$T/typo.conf"
set +e
out=$("$CUPTIMOND" --config "$T/typo.conf" --check-config 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "flush_perod_s" || fail "an unknown key was not named: $out"

cat > "$T/good.conf" <<CONF
{"segment_size": "1M", "compress_level": 0, "archive_max_bytes": "6M",
 "retention_period_s": 1, "flush_period_s": 0.2}
CONF
"$CUPTIMOND" --config "$T/good.conf" --check-config | grep -q '"archive_max_bytes": 6291456' \
    || fail "--check-config does not show the file's values"

start_daemon --config "$T/good.conf"
pids=
for i in 1 2; do
    workload --kernels 150000 --rate 50000 --memcpy-every 0 --memset-every 0 --report "$T/r$i.json" &
    pids="$pids $!"
done
peak=0
for _ in $(seq 30); do
    sz=$(du -sb "$T/out/archive" | cut -f1)
    [ "$sz" -gt "$peak" ] && peak=$sz
    sleep 0.1
done
# shellcheck disable=SC2086
wait $pids
sleep 2.2
final=$(du -sb "$T/out/archive" | cut -f1)
produced=$(( 2 * 150000 * 216 ))
# The cap, plus each live session's segment being written, plus what is
# written while a sweep (started every eighth of the cap) runs.
limit=$(( 6 * 1048576 + 2 * 1048576 + 3 * 1048576 ))
[ "$final" -le $(( 6 * 1048576 + 262144 )) ] || fail "after the producers ended the archive is $final bytes, over the 6M cap"
[ "$peak" -le "$limit" ] || fail "the archive peaked at $peak bytes (cap 6M + live segments)"
[ "$produced" -gt $(( 3 * 6 * 1048576 )) ] || fail "the test did not write enough to exercise the cap"
ctl status --json | python3 -c 'import json,sys; r=json.load(sys.stdin)["daemon"]["retention"]; assert r["max_bytes"]==6291456, r'

# Reload: a bad file is reported and the running configuration kept.
cp "$T/bad.conf" "$T/good.conf.new"; mv "$T/good.conf.new" "$T/good.conf"
kill -HUP "$DPID"
wait_for 30 grep -q "keeping the running configuration" "$T/daemon.log" || fail "SIGHUP with a bad file was not reported"
set +e
out=$(ctl reload 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "flush_period_s" || fail "cuptimonctl reload of a bad file: $rc $out"
ctl status --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["daemon"]; assert d["flush_period_s"]==0.2, d' \
    || fail "the running configuration changed after a bad reload"
echo '{"flush_period_s": 0.7, "archive_max_bytes": "6M", "segment_size": "1M"}' > "$T/good.conf"
ctl reload | grep -q "reloaded" || fail "cuptimonctl reload of a good file failed"
ctl status --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["daemon"]; assert d["flush_period_s"]==0.7, d' \
    || fail "the reloaded value is not in effect"
stop_daemon
echo "ok (archive peak $peak, final $final bytes, cap 6291456; produced $produced)"
