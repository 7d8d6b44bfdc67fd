#!/bin/bash
# A trace window's --output (issue 21, item 6).  The daemon writes the
# trace with its own rights, so a path an operator chooses is held to what
# the operator could do themselves: the trace is created only in a
# directory the requesting user may write, replaces only a regular file
# that user owns (never a file of someone else, a device or a FIFO), and
# links are never written through.  The requester here is 'nobody', an
# operator by being in the daemon's control_group; root is held to the
# same rule for other users' files.  Needs root and setpriv.
# It runs no workload through the libcupti test double.
CUPTIMON_TEST_NO_DOUBLE=1
. "$top_srcdir/tests/fault/fault-lib.sh"
need_nobody
group=$(getent group 65534 | cut -d: -f1)
[ -n "$group" ] || skip "no group 65534 to make nobody an operator with"

start_daemon --control-group "$group" --flush-period 0.2

# try WHO PATH: a window over every session with its trace at PATH, opened
# and ended by WHO (root or nobody); prints what cuptimonctl said and
# returns 0 when the trace was written, else not 0 (refused, failed, or no
# answer in 20 s).
try() {
    local as=() out rc
    [ "$1" = nobody ] && as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    set +e
    out=$(timeout 20 "${as[@]}" "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
        begin-window --all --output "$2" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then
        out=$(timeout 20 "${as[@]}" "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
            end-window --json 2>&1); rc=$?
    fi
    set -e
    echo "$out"
    return $rc
}
# untouched PATH TEXT OWNER MODE: PATH still holds TEXT with that owner and mode.
untouched() {
    [ "$(cat "$1")" = "$2" ] && [ "$(stat -c %u:%a "$1")" = "$3:$4" ] ||
        fail "$1 was changed: $(stat -c '%u:%g %a %s bytes' "$1"), $(head -c 80 "$1")"
}

# A 0600 root file in root's directory: nobody's window must not replace
# it (it did, with the trace), and the refusal says why.
echo secret > "$T/victim"
chmod 600 "$T/victim"
out=$(try nobody "$T/victim") && fail "nobody's window replaced root's $T/victim: $out"
echo "$out" | grep -q "uid 65534 may not create files in $T " || fail "the refusal does not say why: $out"
untouched "$T/victim" secret 0 600

# A directory only root may write: not through a link nobody made, not
# named directly.
mkdir -m 700 "$T/rootdir"
mkdir "$T/nb" && chown 65534:65534 "$T/nb"
as_nobody ln -s "$T/rootdir" "$T/nb/into"
out=$(try nobody "$T/nb/into/new.json") && fail "nobody's window wrote into root's directory through a link: $out"
echo "$out" | grep -q "may not create files in" || fail "the refusal does not say why: $out"
out=$(try nobody "$T/rootdir/new.json") && fail "nobody's window wrote into root's directory: $out"
[ -z "$(ls -A "$T/rootdir")" ] || fail "root's directory got $(ls -A "$T/rootdir")"

# A link at the path itself is not followed: the trace takes the link's
# place (the link is nobody's), root's file stays.
as_nobody ln -s "$T/victim" "$T/nb/link"
try nobody "$T/nb/link" >/dev/null || fail "nobody cannot replace its own link with a trace"
untouched "$T/victim" secret 0 600
[ -f "$T/nb/link" ] && [ ! -L "$T/nb/link" ] || fail "$T/nb/link is not the trace"

# Not a regular file: never written in place.
out=$(try root /dev/null) && fail "root's window wrote to /dev/null in place: $out"
echo "$out" | grep -q "not a regular file" || fail "the refusal of /dev/null does not say why: $out"
as_nobody mkfifo "$T/nb/fifo"
out=$(try nobody "$T/nb/fifo") && fail "nobody's window wrote into a FIFO: $out"
echo "$out" | grep -q "not a regular file" || fail "the refusal of a FIFO does not say why: $out"
[ -p "$T/nb/fifo" ] || fail "the FIFO was replaced"

# A shared sticky directory: root's file there stays; nobody's own file is
# replaced by the trace, which is nobody's.
mkdir -m 1777 "$T/shared"
echo rootfile > "$T/shared/r.json"
chmod 644 "$T/shared/r.json"
out=$(try nobody "$T/shared/r.json") && fail "nobody's window replaced root's file in a sticky directory: $out"
echo "$out" | grep -q "owned by uid 0" || fail "the refusal does not say whose the file is: $out"
untouched "$T/shared/r.json" rootfile 0 644
as_nobody sh -c "echo mine > $T/shared/n.json"
try nobody "$T/shared/n.json" >/dev/null || fail "nobody cannot replace its own file"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/shared/n.json" || fail "$T/shared/n.json is not a trace"
[ "$(stat -c %u:%g "$T/shared/n.json")" = 65534:65534 ] || fail "nobody's trace is $(stat -c %u:%g "$T/shared/n.json")"

# A new file in nobody's directory: nobody's, 0640, a trace.
try nobody "$T/nb/new.json" >/dev/null || fail "nobody cannot write a trace into its own directory"
[ "$(stat -c %u:%g:%a "$T/nb/new.json")" = 65534:65534:640 ] ||
    fail "nobody's new trace is $(stat -c %u:%g:%a "$T/nb/new.json")"
as_nobody cat "$T/nb/new.json" | python3 -c 'import json,sys; json.load(sys.stdin)' ||
    fail "nobody cannot read its trace"

# Root replaces its own file, but not nobody's.
echo old > "$T/rootfile.json"
try root "$T/rootfile.json" >/dev/null || fail "root cannot replace its own file"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/rootfile.json" || fail "root's file is not the trace"
out=$(try root "$T/shared/n.json") && fail "root's window replaced nobody's file: $out"
echo "$out" | grep -q "owned by uid 65534" || fail "the refusal does not say whose the file is: $out"
# Nothing was left behind: no temporary files.
left=$(find "$T/nb" "$T/shared" "$T" -maxdepth 1 -name '*.tmp*' | head -3)
[ -z "$left" ] || fail "temporary files left: $left"
stop_daemon
echo ok
