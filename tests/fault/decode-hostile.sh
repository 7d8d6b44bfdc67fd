#!/bin/bash
# cuptimonctl decode on damaged and hostile archives (issue 21, item 8).  A
# real daemon archives a real workload (raw chunks, 1 MiB segments: five
# segments of about 15 chunks); each case then damages a copy of that
# session one way and runs the real cuptimonctl decode on it, under a
# timeout.  Every case must finish at once, say what it found (naming the
# file), and lose only what the damage covers:
#   - a FIFO as meta.json, strings.bin or a segment (used to hang for ever);
#   - a segment extended by a 4 GiB hole (used to take 8 s and 4.2 GB);
#   - one flipped bit in a segment's file header (used to drop its chunks);
#   - a segment that is a directory, or unreadable (used to end the session);
#   - meta.json missing (the session vanished without a word), a symbolic
#     link loop, or damaged JSON (every record was lost): the segments name
#     the CUPTI version, so the records are still decoded;
#   - one flipped bit in the first kernel name's strings.bin entry (every
#     name was lost);
#   - a segment copied beside itself (its records were counted twice).
# A segment shrinking while it is read (SIGBUS) is in tests/unit/test-archive.
. "$top_srcdir/tests/fault/fault-lib.sh"

start_daemon --segment-size 1M --compress-level 0
# A pool deep enough, and a rate, that a slow (sanitized, loaded) daemon
# drops nothing: every case counts on about five segments.
CUPTIMON_SLOT_SIZE=64K CUPTIMON_POOL_SLOTS=256 workload --kernels 20000 --rate 40000 --quiet \
    --report "$T/w.json" ||
    fail "the workload failed"
stop_daemon
SRC=$(ls -d "$T"/out/archive/*/)
SRC=${SRC%/}
nsegs=$(ls "$SRC"/seg-*.cpt | wc -l)
[ "$nsegs" -ge 4 ] || fail "the workload left $nsegs segments, the cases want at least 4"

# fresh NAME: a copy of the session as $T/c/NAME/archive/<session>, in $D.
fresh() {
    mkdir -p "$T/c/$1/archive"
    cp -a "$SRC" "$T/c/$1/archive/"
    D=$T/c/$1/archive/$(basename "$SRC")
}

# decode NAME: cuptimonctl decode of $T/c/NAME within 10 s; its stderr in
# $T/c/NAME.err, its summary in $T/c/NAME.sum, wall time and peak RSS (KiB)
# in $SECS and $RSS_KB.  Fails when it does not finish or exits non-zero.
decode() {
    local rc=0 t0
    t0=$(now_ms)
    /usr/bin/time -f "%M" -o "$T/c/$1.time" timeout -s KILL 10 \
        "$CTL" decode "$T/c/$1" -o "$T/c/$1.json" --summary-out "$T/c/$1.sum" \
        2>"$T/c/$1.err" || rc=$?
    SECS=$(( $(now_ms) - t0 ))
    RSS_KB=$(tail -n 1 "$T/c/$1.time")
    [ "$rc" != 137 ] || fail "$1: cuptimonctl decode did not finish within 10 s"
    [ "$rc" = 0 ] || fail "$1: cuptimonctl decode exited $rc: $(cat "$T/c/$1.err")"
}

# field NAME EXPR: a Python expression over the summary `s` and the first
# session `x` of case NAME.
field() {
    python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
x = s["sessions"][0] if s["sessions"] else {}
print(eval(sys.argv[2]))' "$T/c/$1.sum" "$2"
}

# said NAME TEXT: stderr of case NAME has a line naming a file of the
# session and holding TEXT.
said() {
    grep -F -- "$2" "$T/c/$1.err" | grep -q -F -- "$T/c/$1/" ||
        fail "$1: no message naming the file and saying '$2'; stderr: $(cat "$T/c/$1.err")"
}

# same_kernels NAME: case NAME decoded every kernel of the intact session.
same_kernels() {
    local k
    k=$(field "$1" 's["records"]["kernel"]')
    [ "$k" = "$REF_KERNELS" ] || fail "$1: $k kernels decoded, the intact session has $REF_KERNELS"
}

fresh ref
decode ref
REF_KERNELS=$(field ref 's["records"]["kernel"]')
REF_CHUNKS=$(field ref 'x["chunks"]')
[ "$REF_KERNELS" -gt 10000 ] || fail "the intact session decodes to $REF_KERNELS kernels"
[ ! -s "$T/c/ref.err" ] || fail "the intact session is reported as damaged: $(cat "$T/c/ref.err")"
echo "intact: $REF_KERNELS kernels in $REF_CHUNKS chunks, $nsegs segments; ${SECS} ms, ${RSS_KB} KiB"

# FIFOs: refused at once, without opening them for reading.
fresh fifo-meta
rm "$D/meta.json" && mkfifo "$D/meta.json"
decode fifo-meta
said fifo-meta "meta.json: a FIFO, not a regular file"
same_kernels fifo-meta
fresh fifo-strings
rm "$D/strings.bin" && mkfifo "$D/strings.bin"
decode fifo-strings
said fifo-strings "strings.bin: a FIFO, not a regular file"
same_kernels fifo-strings
fresh fifo-segment
mkfifo "$D/seg-000099.cpt"
decode fifo-segment
said fifo-segment "seg-000099.cpt: a FIFO, not a regular file"
same_kernels fifo-segment
echo "fifo: meta.json, strings.bin and a segment refused at once"

# A sparse segment: 4 GiB of hole after the last chunk.
fresh sparse
last=$(ls "$D"/seg-*.cpt | tail -n 1)
truncate -s +4G "$last"
decode sparse
said sparse "no chunk after it in this segment (4294967296 bytes passed over)"
same_kernels sparse
echo "sparse: 4 GiB hole read in ${SECS} ms, peak RSS ${RSS_KB} KiB"
[ "$SECS" -lt 3000 ] || fail "sparse: the 4 GiB hole took $SECS ms"
[ "$RSS_KB" -lt 102400 ] || fail "sparse: peak RSS $RSS_KB KiB for a 4 GiB hole"

# One bit of a segment's file header.
fresh seg-header
printf '\x00' | dd of="$D/seg-000001.cpt" bs=1 seek=3 conv=notrunc status=none
decode seg-header
said seg-header "seg-000001.cpt: offset 0: a damaged segment header"
same_kernels seg-header

# An unusable segment costs only itself: what a session without that
# segment decodes to.
fresh without-seg1
rm "$D/seg-000001.cpt"
decode without-seg1
WITHOUT1=$(field without-seg1 's["records"]["kernel"]')
[ "$WITHOUT1" -lt "$REF_KERNELS" ] || fail "seg-000001.cpt holds no kernel"
fresh dir-segment
rm "$D/seg-000001.cpt" && mkdir "$D/seg-000001.cpt"
decode dir-segment
said dir-segment "seg-000001.cpt: a directory, not a regular file"
[ "$(field dir-segment 's["records"]["kernel"]')" = "$WITHOUT1" ] ||
    fail "dir-segment: $(field dir-segment 's["records"]["kernel"]') kernels, $WITHOUT1 without the segment"
fresh unreadable
chmod 000 "$D/seg-000001.cpt"
if [ "$(id -u)" = 0 ]; then
    # Root reads a mode 000 file: read it as nobody instead.
    if command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
        chmod 755 "$T" "$T/c" && chmod -R a+rX "$T/c/unreadable" && chmod 000 "$D/seg-000001.cpt"
        chmod 777 "$T/c"
        AS_NOBODY="setpriv --reuid=nobody --regid=$(id -g nobody) --clear-groups"
    else
        AS_NOBODY=skip
    fi
fi
if [ "${AS_NOBODY:-}" != skip ]; then
    rc=0
    ${AS_NOBODY:-} timeout -s KILL 10 "$CTL" decode "$T/c/unreadable" -o "$T/c/unreadable.json" \
        --summary-out "$T/c/unreadable.sum" 2>"$T/c/unreadable.err" || rc=$?
    [ "$rc" = 0 ] || fail "unreadable: cuptimonctl decode exited $rc: $(cat "$T/c/unreadable.err")"
    said unreadable "seg-000001.cpt: Permission denied: its chunks are lost, the next segment is read"
    [ "$(field unreadable 's["records"]["kernel"]')" = "$WITHOUT1" ] ||
        fail "unreadable: $(field unreadable 's["records"]["kernel"]') kernels, $WITHOUT1 without the segment"
else
    echo "unreadable: skipped (root, and no setpriv or no user nobody to read as)"
fi

# meta.json: missing, a symbolic link loop, damaged JSON.
fresh meta-missing
rm "$D/meta.json"
decode meta-missing
said meta-missing "its records are decoded as of CUPTI API version 130001, which its segments name"
[ "$(field meta-missing 'x["pid"]')" = "$(field ref 'x["pid"]')" ] ||
    fail "meta-missing: pid $(field meta-missing 'x["pid"]'), not the directory's"
[ "$(field meta-missing 'len(s["sessions"])')" = 1 ] || fail "meta-missing: the session is not listed"
[ "$(field meta-missing 'x["chunks"]')" = "$REF_CHUNKS" ] || fail "meta-missing: chunks not all read"
same_kernels meta-missing
fresh meta-loop
rm "$D/meta.json" && ln -s meta.json "$D/meta.json"
decode meta-loop
said meta-loop "meta.json: a symbolic link (not followed)"
same_kernels meta-loop
fresh meta-damaged
# One byte: the comma after the hostname, which makes the file invalid JSON.
sed -i '0,/"hostname":\(".*"\),/s//"hostname":\1\x01/' "$D/meta.json"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$D/meta.json" 2>/dev/null &&
    fail "meta-damaged: the damaged meta.json still parses"
decode meta-damaged
said meta-damaged "meta.json: damaged (not valid JSON); salvaged"
same_kernels meta-damaged
echo "meta.json: missing, looping and damaged sessions decoded and reported"

# One bit of the first kernel name's entry costs that name only (entries
# under keys that are no pointers, such as the record sizes the shim
# measured, may come first).
fresh strings
first=$(python3 -c 'import struct, sys
b = open(sys.argv[1], "rb").read()
off = 16
while off + 16 <= len(b):
    key, n = struct.unpack_from("<QI", b, off)
    if key >> 62 == 0:
        print(off)
        break
    off += 16 + n' "$D/strings.bin")
printf '\x20' | dd of="$D/strings.bin" bs=1 seek=$((first + 19)) conv=notrunc status=none
decode strings
said strings "strings.bin: offset $first: a damaged entry"
same_kernels strings
unknown=$(python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))
print(len({e["name"] for e in t["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") == "kernel" and e["name"].startswith("<unknown")}))' \
    "$T/c/strings.json")
[ "$unknown" = 1 ] || fail "strings: $unknown kernel names lost for one damaged entry"

# A segment copied beside itself.
fresh duplicate
cp "$D/seg-000001.cpt" "$D/seg-000001-copy.cpt"
decode duplicate
said duplicate "seg-000001.cpt: offset 16: chunk"
same_kernels duplicate
[ "$(field duplicate 'x["duplicate_chunks"]')" -gt 0 ] || fail "duplicate: no duplicate chunk counted"
echo "ok"
