#!/bin/bash
# cuptimond and cuptimonctl: help, version, bad usage and a missing daemon
# each give a clear message and the documented exit status.
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
