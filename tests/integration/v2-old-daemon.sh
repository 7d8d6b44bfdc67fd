#!/bin/bash
# The shim on CUPTI's v2 path beside a daemon older than it (one that knows
# neither LAYOUTS nor "user_defined_records"; issue 28): it never sends
# that daemon a LAYOUTS message; whenever its records' layouts change (the
# first buffer, and a kind the daemon enables) it waits until the daemon
# has given back every buffer, then says hello again with the new layouts,
# so that every buffer the daemon gets is described by the hello of its
# connection; and its hellos announce impossible record sizes for the
# kinds they do not describe, so that such a daemon refuses, rather than
# misreads, what it cannot know.  The old daemon is a small stand-in that
# speaks the protocol of the daemon before issue 28.
. "$top_srcdir/tests/integration/lib.sh"

python3 - "$CUPTIMON_SOCKET" "$T/old.json" <<'PY' &
import json, os, select, socket, struct, sys, time
HDR = struct.Struct("<IHHII")
MAGIC = 0x4D545043
path, out = sys.argv[1], sys.argv[2]
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(path)
ls.listen(8)
conns = {}   # socket -> state
hellos, types, released, sent_enable = [], [], 0, False
start = time.time()
def send(c, typ, body):
    c.sendall(HDR.pack(MAGIC, 1, typ, len(body), 0) + body)
deadline = start + 60
while time.time() < deadline:
    r, _, _ = select.select([ls] + list(conns), [], [], 0.2)
    for s in r:
        if s is ls:
            c, _ = ls.accept()
            conns[c] = {"buf": b"", "hello": False}
            continue
        st = conns[s]
        try:
            if not st["hello"]:
                data, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(4 * 4))
                for lvl, typ, d in anc:
                    for i in range(0, len(d) - len(d) % 4, 4):
                        os.close(struct.unpack("i", d[i:i + 4])[0])
            else:
                data = s.recv(1 << 20)
        except OSError:
            data = b""  # the shim left (a reset, when it left unread messages)
        if not data:
            del conns[s]
            s.close()
            continue
        st["buf"] += data
        while len(st["buf"]) >= HDR.size:
            magic, ver, typ, n, flags = HDR.unpack_from(st["buf"])
            if len(st["buf"]) < HDR.size + n:
                break
            body = st["buf"][HDR.size:HDR.size + n]
            st["buf"] = st["buf"][HDR.size + n:]
            types.append(typ)
            try:
                if typ == 0x0101:
                    st["hello"] = True
                    hellos.append(json.loads(body))
                    # The ACK of a daemon before issue 28: no "layouts".
                    send(s, 0x0102, json.dumps({"session": len(hellos), "ranges": False}).encode())
                elif typ == 0x0201:
                    slot, = struct.unpack_from("<I", body, 0)
                    seq, = struct.unpack_from("<Q", body, 48)
                    send(s, 0x0202, struct.pack("<IIQ", slot, 0, seq))
                    released += 1
                    if not sent_enable and released >= 2:
                        # A window's kind: the records' layouts change.
                        send(s, 0x0302, json.dumps({"kinds": [5]}).encode())
                        sent_enable = True
            except OSError:
                pass  # gone meanwhile: the next read says so
    # Flush now and then, as a daemon does.
    for c in list(conns):
        try:
            send(c, 0x0301, struct.pack("<QII", int(time.time() * 1000), 0, 0))
        except OSError:
            pass
    if hellos and not conns and time.time() - start > 5:
        break
json.dump({"hellos": hellos, "types": types, "released": released}, open(out, "w"))
PY
fake=$!
for _ in $(seq 1 50); do [ -S "$CUPTIMON_SOCKET" ] && break; sleep 0.1; done
FAKECUPTI_VERSION=130300 workload --kernels 4000 --rate 1000 --memcpy-every 7 --report "$T/r.json" \
    2>"$T/err" >/dev/null || { cat "$T/err"; fail "the workload failed"; }
wait "$fake" || fail "the stand-in daemon failed"
grep -q "the daemon is older than this shim and does not take record layout changes" "$T/err" ||
    { cat "$T/err"; fail "the shim did not say it renews its hello"; }
python3 - "$T/old.json" "$T/r.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
rep = json.load(open(sys.argv[2]))
assert 0x0206 not in o["types"], "LAYOUTS sent to a daemon that does not take it"
hs = o["hellos"]
assert all(h["activity_api"] == "v2" and h["user_defined_records"] for h in hs), hs
# Every kind the shim may enable is announced, with its described size or
# an impossible one.
for h in hs:
    rl = h.get("record_layouts", {})
    for k, size in h["record_sizes"].items():
        assert size == (rl[k]["size"] if k in rl else 1), (k, size, rl.get(k))
described = [set(h.get("record_layouts", {})) for h in hs]
assert any("10" in d and "5" not in d for d in described), described
assert "5" in described[-1], described
assert len(hs) >= 3, f"{len(hs)} hellos: the first, then one per layout change"
# Every buffer went to a daemon that was told its layouts, and came back.
assert o["released"] == o["types"].count(0x0201) > 0, o["released"]
assert rep["dropped"] == 0, rep
print(f"old daemon: {len(hs)} hellos, {o['released']} buffers, no LAYOUTS")
PY
echo "ok"
