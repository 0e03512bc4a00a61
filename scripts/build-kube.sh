#!/usr/bin/env bash
# Build the real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
# from the published Go modules pinned in tools/kube and tools/etcd, cached outside the checkout.
#
# Usage: scripts/build-kube.sh     prints the directory holding the four binaries on stdout.
# Cache: ${TEPHRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tephra}/kube-<version>-<pin hash>/
# The cache key hashes both modules' go.mod and go.sum and this script, so a changed pin builds
# anew and an unchanged one is reused. Only the first build pays (measured: see README.md).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KUBE_VERSION="v1.37.2"
CACHE_ROOT="${TEPHRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tephra}"
PIN_HASH="$(cat "$ROOT"/tools/kube/go.{mod,sum} "$ROOT"/tools/etcd/go.{mod,sum} "$0" \
    | sha256sum | cut -c1-12)"
DEST="$CACHE_ROOT/kube-$KUBE_VERSION-$PIN_HASH"
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler)

die() { echo "build-kube: $*" >&2; exit 1; }

built() {
    local b
    for b in "${BINARIES[@]}"; do [[ -x "$DEST/$b" ]] || return 1; done
}

if built; then echo "$DEST"; exit 0; fi
command -v go >/dev/null 2>&1 || die "the Go toolchain is required to build the control plane"

mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9
if built; then echo "$DEST"; exit 0; fi

# The modules say `go 1.26.0`; a newer requirement would need GOTOOLCHAIN (see README.md).
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
STAMP="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
MINOR="$(echo "$KUBE_VERSION" | cut -d. -f2)"
LDFLAGS="-s -w"
for kv in "gitVersion=$KUBE_VERSION" gitMajor=1 "gitMinor=$MINOR" gitTreeState=clean \
    "buildDate=$STAMP"; do
    LDFLAGS="$LDFLAGS -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done

started=$SECONDS
echo "build-kube: building etcd (first build only)" >&2
(cd "$ROOT/tools/etcd" && go build -trimpath -o "$DEST/etcd.tmp" .)
echo "build-kube: building kube-apiserver, kube-controller-manager, kube-scheduler" \
    "$KUBE_VERSION (first build only; several minutes)" >&2
mkdir -p "$DEST/tmp"
(cd "$ROOT/tools/kube" && go build -trimpath -ldflags "$LDFLAGS" -o "$DEST/tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler)
"$DEST/tmp/kube-apiserver" --version | grep -qx "Kubernetes $KUBE_VERSION" \
    || die "kube-apiserver reports $("$DEST/tmp/kube-apiserver" --version), not $KUBE_VERSION"
# Publish atomically: a build cut off half-way leaves no binary that `built` would accept.
mv "$DEST/etcd.tmp" "$DEST/etcd"
for b in kube-apiserver kube-controller-manager kube-scheduler; do mv "$DEST/tmp/$b" "$DEST/$b"; done
rmdir "$DEST/tmp"
echo "build-kube: built in $((SECONDS - started)) s into $DEST" >&2
echo "$DEST"
