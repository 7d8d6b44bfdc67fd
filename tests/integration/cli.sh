#!/bin/bash
# cuptimond and cuptimonctl: help, version, bad usage and a missing daemon
# each give a clear message and the documented exit status.
# It runs no workload through the libcupti test double.
CUPTIMON_TEST_NO_DOUBLE=1
. "$top_srcdir/tests/integration/lib.sh"

"$CUPTIMOND" --help | grep -q -- "--output-dir" || fail "cuptimond --help lacks --output-dir"
"$CUPTIMOND" --version | grep -q "^cuptimond " || fail "cuptimond --version"
# Every long option cuptimond accepts is in its --help and its man page.
help=$("$CUPTIMOND" --help)
man=$(sed 's/\\-/-/g; s/\\f[BIRP]//g; s/"//g' "$top_srcdir/doc/cuptimond.8")
nopt=0
for o in $(sed -n '/static const struct option opts\[\]/,/{NULL/p' "$top_srcdir/daemon/main.c" |
           sed -n 's/^ *{"\([a-z-]*\)".*/\1/p'); do
    nopt=$((nopt + 1))
    echo "$help" | grep -q -- "--$o\b" || fail "cuptimond --help lacks --$o"
    echo "$man" | grep -q -- "--$o\b" || fail "cuptimond(8) lacks --$o"
done
[ $nopt -ge 10 ] || fail "found only $nopt long options in daemon/main.c: the pattern is stale"
# Every command cuptimonctl knows (its own list, from its command table) is
# in its --help and its man page.
known=$("$CTL" no-such-command 2>&1 | sed -n 's/.*(commands: \(.*\))$/\1/p' | tr -d ,)
[ "$(echo $known | wc -w)" -ge 10 ] || fail "cuptimonctl's command list is missing or short: '$known'"
chelp=$("$CTL" --help)
cman=$(sed 's/\\-/-/g; s/\\f[BIRP]//g; s/"//g' "$top_srcdir/doc/cuptimonctl.1")
for c in $known; do
    [ "$c" = help ] && continue
    echo "$chelp" | grep -q "^  $c\b" || fail "cuptimonctl --help lacks the command $c"
    echo "$cman" | grep -q -- "^\.B[IR]* $c\b" || fail "cuptimonctl(1) lacks the command $c"
done
"$CTL" --help | grep -q "status" || fail "cuptimonctl --help lacks status"
"$CTL" --version | grep -q "^cuptimonctl " || fail "cuptimonctl --version"

# Every key of the configuration file (conf.c's key table) is documented in
# cuptimond.conf(5), as the tag of its own entry, and shown by --check-config.
# (An entry's tag is the line after .TP; other lines may name a key too.)
tags=$(sed 's/\\-/-/g; s/\\f[BIRP]//g; s/"//g' "$top_srcdir/doc/cuptimond.conf.5" |
       awk 'prev == ".TP" { print } { prev = $0 }')
echo '{}' >"$T/empty.conf"
dump=$("$CUPTIMOND" --config "$T/empty.conf" --check-config)
nkey=0
for k in $(sed -n '/static const struct key keys\[\]/,/^};/p' "$top_srcdir/daemon/conf.c" |
           sed -n 's/^ *{"\([a-z_]*\)".*/\1/p'); do
    nkey=$((nkey + 1))
    echo "$tags" | grep -q "^\.BR* $k\b" || fail "cuptimond.conf(5) has no entry for the key $k"
    echo "$dump" | grep -q "^  \"$k\": " || fail "cuptimond --check-config does not show the key $k"
done
[ $nkey -ge 18 ] || fail "found only $nkey keys in daemon/conf.c: the pattern is stale"

# An option that sets a key is checked by the key's own rule: the message
# names the option, the key and the value, and the exit status is 2.
for bad in --metrics-interval=0 --segment-size=1000 --log-level=loud --compress-level=-1 \
           --metrics-file=relative.prom --control-group=no-such-group-cuptimon-test; do
    set +e
    out=$("$CUPTIMOND" "$bad" --check-config 2>&1); rc=$?
    set -e
    [ $rc -eq 2 ] || fail "$bad: exit $rc, want 2: $out"
    opt=${bad%%=*}
    echo "$out" | grep -q -- "^cuptimond: $opt: [a-z_]*: '${bad#*=}' is not " ||
        fail "$bad: the message does not name the option, the key and the value: $out"
done
# The options win over the file, and --check-config shows the result.
echo '{"metrics_interval_s": 5, "aggregate": true, "compress_level": 3}' >"$T/opt.conf"
out=$("$CUPTIMOND" --config "$T/opt.conf" --no-aggregate --metrics-interval=30 \
      --metrics-file=/run/cuptimon-test.prom --check-config)
for want in '"aggregate": false' '"metrics_interval_s": 30.0' \
            '"metrics_file": "/run/cuptimon-test.prom"' '"compress_level": 3'; do
    echo "$out" | grep -qF "$want" || fail "--check-config lacks $want: $out"
done
# What --check-config prints is a configuration the daemon reads back.
echo "$out" | sed 1d >"$T/dumped.conf"
"$CUPTIMOND" --config "$T/dumped.conf" --check-config | sed 1d | cmp -s - "$T/dumped.conf" ||
    fail "--check-config's output does not read back the same"
# Options that would upset the file's keys are refused, naming both keys.
echo '{"archive_max_bytes": "32M"}' >"$T/cap.conf"
set +e
out=$("$CUPTIMOND" --config "$T/cap.conf" --segment-size=64M --check-config 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "archive_max_bytes.*segment_size" ||
    fail "--segment-size over the file's byte cap: $rc $out"

set +e
out=$("$CUPTIMOND" --flush-period=abc 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "bad --flush-period: exit $rc, want 2"
echo "$out" | grep -q "'abc'" || fail "bad --flush-period message does not name the value: $out"

set +e
out=$("$CUPTIMOND" --compress-level=42 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q "'42'" || fail "bad --compress-level: $rc $out"

set +e
out=$(ctl status 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "status without a daemon: exit $rc, want 1"
echo "$out" | grep -q "not running" || fail "status without a daemon says: $out"
echo "$out" | grep -q "$CUPTIMON_CONTROL_SOCKET" || fail "the message does not name the socket: $out"

set +e
out=$("$CTL" frobnicate 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q "unknown command 'frobnicate'" || fail "unknown command: $rc $out"

# The daemon's op table (daemon/control.c, one row a line) against
# cuptimonctl's command table (cli/main.c, whose op column is the request a
# command sends): every op is sent by some command or says, in the row's
# last column, who else sends it; an op that a command sends is not also
# called internal; and every op a command sends is one the daemon knows.
optable=$(sed -n '/^static const struct ctl_op ctl_ops\[\] = {$/,/^};$/p' "$top_srcdir/daemon/control.c")
ops=$(echo "$optable" | sed -n 's/^ *{"\([a-z_]*\)", [a-z_]*, CTL_[A-Z]*, .*},$/\1/p')
internal=$(echo "$optable" | sed -n 's/^ *{"\([a-z_]*\)", [a-z_]*, CTL_[A-Z]*, "[^"][^"]*"},$/\1/p')
[ "$(echo $ops | wc -w)" -ge 10 ] || fail "found only '$(echo $ops)' in daemon/control.c's op table: the pattern is stale"
cliops=$(sed -n '/^static const struct command commands\[\] = {$/,/^};$/p' "$top_srcdir/cli/main.c" |
         sed -n 's/^ *{"[a-z-]*", [a-z_]*, "\([a-z_]*\)"},$/\1/p')
[ "$(echo $cliops | wc -w)" -ge 8 ] || fail "found only '$(echo $cliops)' in cli/main.c's command table: the pattern is stale"
for op in $ops; do
    sent=0; for c in $cliops; do [ "$c" = "$op" ] && sent=1; done
    says=0; for i in $internal; do [ "$i" = "$op" ] && says=1; done
    [ $sent = 1 ] || [ $says = 1 ] ||
        fail "no cuptimonctl command sends the op $op and its row in daemon/control.c does not say who does"
    [ $sent = 0 ] || [ $says = 0 ] ||
        fail "the op $op is sent by a cuptimonctl command, yet daemon/control.c calls it internal"
done
for c in $cliops; do
    echo " $(echo $ops) " | grep -q " $c " || fail "cuptimonctl sends the op $c, which is not in the daemon's op table"
done

start_daemon
# The daemon's "unknown op" reply is made from the table: an operator (this
# test's user is the daemon's) is told exactly the table's ops, in order.
listed=$(known_ops) || fail "the daemon's reply to an unknown op is not as expected"
[ "$(echo $listed)" = "$(echo $ops)" ] ||
    fail "the daemon's unknown-op reply lists '$(echo $listed)', its op table '$(echo $ops)'"
# A second daemon on the same sockets refuses to start and says why.
set +e
out=$("$CUPTIMOND" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --output-dir "$T/out2" 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && echo "$out" | grep -q "already listening" || fail "second daemon: $rc $out"
ctl status | grep -q "0 session(s) connected" || fail "status of an idle daemon"
ctl status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["sessions"]==[]; assert d["daemon"]["version"]'
ctl flush --forced | grep -q "0 of 0 session(s)" || fail "flush with no sessions"
stop_daemon
[ ! -e "$CUPTIMON_SOCKET" ] || fail "the producer socket was left behind"
echo "ok"
