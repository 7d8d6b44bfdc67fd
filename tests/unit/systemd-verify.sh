#!/bin/sh
# systemd accepts the units: systemd-analyze verify over the build's test
# copies (systemd/local.mk: the units as configured, pointing at this build
# tree's programs), with the man pages of Documentation= looked up in doc/;
# and the sysusers.d and tmpfiles.d snippets parse.  Skips (77) where
# systemd-analyze is missing or cannot run here.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
units="$top_builddir/systemd/test"

command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: no systemd-analyze"; exit 77; }
for u in cuptimond.service cuptimond.socket; do
    [ -f "$units/$u" ] || { echo "FAIL: $units/$u was not built"; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-verify.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# Can systemd-analyze verify run at all here (it needs no running systemd,
# but some containers lack what it loads)?
printf '[Service]\nExecStart=/bin/true\n' >"$tmp/cuptimon-probe.service"
if ! systemd-analyze verify --man=no "$tmp/cuptimon-probe.service" >"$tmp/probe.out" 2>&1; then
    echo "SKIP: systemd-analyze verify does not work here:"; cat "$tmp/probe.out"
    exit 77
fi

# Documentation=man:... is checked with man(1) when the pages can be found.
man_opt=--man=no
if command -v man >/dev/null 2>&1; then
    for p in cuptimond.8 cuptimond.conf.5 cuptimonctl.1 libcuptimon.7; do
        sec=${p##*.}
        mkdir -p "$tmp/man/man$sec"
        cp "$top_srcdir/doc/$p" "$tmp/man/man$sec/$p"
    done
    MANPATH="$tmp/man"; export MANPATH
    # A man(1) that cannot read a page from MANPATH here: leave that check out.
    man -w cuptimond.8 >/dev/null 2>&1 && man_opt=--man=yes
fi

cp "$units/cuptimond.service" "$units/cuptimond.socket" "$tmp/"
# Unknown keys and bad values are only warnings to verify (exit status 0):
# any line about our units is a failure.
systemd-analyze verify "$man_opt" "$tmp/cuptimond.socket" "$tmp/cuptimond.service" \
    >"$tmp/verify.out" 2>&1
rc=$?
cat "$tmp/verify.out"
if [ $rc -ne 0 ] || grep -q cuptimon "$tmp/verify.out"; then
    echo "FAIL: systemd-analyze verify ($man_opt) is not clean (exit status $rc)"
    exit 1
fi
echo "ok: systemd-analyze verify $man_opt: cuptimond.socket cuptimond.service"

if command -v systemd-sysusers >/dev/null 2>&1; then
    mkdir -p "$tmp/root/etc"
    if ! systemd-sysusers --root="$tmp/root" --dry-run "$top_srcdir/systemd/cuptimon.sysusers" \
        >"$tmp/sysusers.out" 2>&1; then
        cat "$tmp/sysusers.out"; echo "FAIL: systemd-sysusers rejects cuptimon.sysusers"; exit 1
    fi
    grep -q "cuptimon" "$tmp/sysusers.out" || { cat "$tmp/sysusers.out";
        echo "FAIL: systemd-sysusers would not create the cuptimon group"; exit 1; }
    echo "ok: systemd-sysusers --dry-run: cuptimon.sysusers"
fi
# Creating the directories needs root (they are root's).
if command -v systemd-tmpfiles >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    if ! systemd-tmpfiles --root="$tmp/root" --create "$top_srcdir/systemd/cuptimon.tmpfiles" \
        >"$tmp/tmpfiles.out" 2>&1 || [ -s "$tmp/tmpfiles.out" ] || [ ! -d "$tmp/root/run/cuptimon" ]; then
        cat "$tmp/tmpfiles.out"; echo "FAIL: systemd-tmpfiles rejects cuptimon.tmpfiles"; exit 1
    fi
    echo "ok: systemd-tmpfiles --create: cuptimon.tmpfiles"
fi
exit 0
