#!/bin/sh
# Installs the Debian packages cuptimon needs to build and test (CUDA itself
# is expected at /usr/local/cuda, or pass --with-cuda to configure).
set -eu
pkgs="build-essential autoconf automake libtool pkg-config libuv1-dev libjson-c-dev
libiberty-dev libzstd-dev zlib1g-dev libsqlite3-dev sqlite3 libsystemd-dev check python3 python3-pytest zstd valgrind clang procps systemd binutils util-linux cppcheck clang-format"
missing=
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# shellcheck disable=SC2086
$SUDO apt-get install -y --no-install-recommends $missing
