#!/usr/bin/env bash
# Build kube-apiserver, kube-scheduler and kube-controller-manager once and cache them.
#
# No registry ships these binaries, so we build Debian bookworm's `kubernetes` source
# package (1.20.2) with Debian's Go. Its vendored modern-go/reflect2 v1.0.1 crashes under
# Go >= 1.18 on the first custom-object create; Debian's 1.0.2 replaces it.
# Idempotent: exits at once when the cached binaries exist.
set -euo pipefail

CACHE="${CASCADE_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cascade/kube-1.20.2}"
BIN="$CACHE/bin"
WANT=(kube-apiserver kube-scheduler kube-controller-manager)

have_all() { for b in "${WANT[@]}"; do [ -x "$BIN/$b" ] || return 1; done; }
if have_all; then echo "kube binaries cached in $BIN"; exit 0; fi
echo "kube binaries missing from $BIN: building ${WANT[*]} (about 6 minutes)"
trap 'echo "hack/build-kube.sh: could not build ${WANT[*]} into $BIN; the integration tier needs them" >&2' ERR

SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
SRC_LIST=/etc/apt/sources.list.d/cascade-deb-src.sources
if [ ! -f "$SRC_LIST" ]; then
  $SUDO tee "$SRC_LIST" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  golang-go golang-github-modern-go-reflect2-dev dpkg-dev rsync >/dev/null

WORK="$CACHE/src"
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"
apt-get source -qq kubernetes >/dev/null
cd "$(find . -maxdepth 1 -type d -name 'kubernetes-*' | head -1)"

R2=vendor/github.com/modern-go/reflect2
rm -rf "$R2"; mkdir -p "$R2"
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2/. "$R2/"

export GOFLAGS=-mod=vendor GO111MODULE=on GOPATH="$WORK/gopath" GOCACHE="$WORK/gocache"
make WHAT="cmd/kube-apiserver cmd/kube-scheduler cmd/kube-controller-manager"

mkdir -p "$BIN"
for b in "${WANT[@]}"; do cp "$(find _output -type f -name "$b" | head -1)" "$BIN/$b"; done
cd "$CACHE"; rm -rf "$WORK"
echo "kube binaries built into $BIN"
