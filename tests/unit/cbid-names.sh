#!/bin/sh
# The committed callback-id name table (archive/cbid-names.c) against the
# cupti_runtime_cbid.h and cupti_driver_cbid.h configure found: every id
# that both name must have the same name.  Ids are only ever appended, so
# headers of an older CUDA name fewer (fine), and a newer CUDA's extra ids
# are reported, not failed: `make update-cbid-names` takes them in.
set -u
: "${top_srcdir:?run through make check}"
fail() { echo "FAIL: $*"; exit 1; }
for h in "${CUPTIMON_RUNTIME_CBID_H:-}" "${CUPTIMON_DRIVER_CBID_H:-}"; do
    [ -r "$h" ] || fail "cannot read the cbid header '$h' (CUPTIMON_RUNTIME_CBID_H/CUPTIMON_DRIVER_CBID_H)"
done
tmp=$(mktemp "${TMPDIR:-/tmp}/cuptimon-cbid.XXXXXX")
trap 'rm -f "$tmp"' EXIT
sh "$top_srcdir/archive/gen-cbid.sh" "$CUPTIMON_RUNTIME_CBID_H" "$CUPTIMON_DRIVER_CBID_H" >"$tmp" \
    || fail "gen-cbid.sh failed on the installed headers"
# Both files as "table id name" lines (the _full tables), then compared.
awk '
    /^const char \*const cuptimon__cbid_[a-z]+_full\[/ { t = $4; sub(/\[.*/, "", t); next }
    /^};/ { t = "" }
    t != "" && /^    \[[0-9]+\] = "/ {
        id = $1; gsub(/[^0-9]/, "", id); nm = $3; gsub(/[",]/, "", nm)
        if (FILENAME == ARGV[1]) hdr[t " " id] = nm; else tab[t " " id] = nm
    }
    END {
        bad = 0; both = 0; extra = 0
        for (k in hdr) {
            if (k in tab) {
                both++
                if (hdr[k] != tab[k]) { printf "FAIL: %s: headers %s, table %s\n", k, hdr[k], tab[k]; bad++ }
            } else extra++
        }
        printf "%d ids named by both agree; %d only in the headers", both - bad, extra
        if (extra) printf " (run make update-cbid-names to name them)"
        printf "\n"
        if (both == 0) { print "FAIL: no id in common (not a cbid table?)"; bad++ }
        exit bad != 0
    }' "$tmp" "$top_srcdir/archive/cbid-names.c"
