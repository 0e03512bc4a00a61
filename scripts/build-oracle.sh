#!/usr/bin/env bash
# Build an oracle -- the real thing Tephra is checked against -- from the published Go module
# pinned in tools/<name>, cached outside the checkout, with the CRDs taken from the same module.
#
# Usage: scripts/build-oracle.sh NAME   (NAME: volcano, training-operator, kuberay)
#        prints the directory holding the binaries and crds/ on stdout.
# Cache: ${TEPHRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tephra}/<name>-<version>-<pin hash>/
#        vc-scheduler, vc-controller-manager, vc-webhook-manager | training-operator | ray-operator,
#        and crds/*.yaml copied from the module cache at build time.
# The cache key hashes the module's go.mod and go.sum and this script, so a changed pin builds
# anew and an unchanged one is reused. Only the first build pays (measured: see README.md).
# The builds share Go's one module and build cache with scripts/build-kube.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NAME="${1:-}"
die() { echo "build-oracle: $*" >&2; exit 1; }

# Per oracle: module, version, "package=binary" pairs, CRD directories inside the module.
case "$NAME" in
volcano)
    MODULE=volcano.sh/volcano VERSION=v1.10.0
    COMMANDS=(cmd/scheduler=vc-scheduler cmd/controller-manager=vc-controller-manager
        cmd/webhook-manager=vc-webhook-manager)
    CRD_DIRS=(config/crd/volcano/bases config/crd/jobflow/bases) ;;
training-operator)
    MODULE=github.com/kubeflow/training-operator VERSION=v1.8.1
    COMMANDS=(cmd/training-operator.v1=training-operator)
    CRD_DIRS=(manifests/base/crds) ;;
kuberay)
    MODULE=github.com/ray-project/kuberay/ray-operator VERSION=v1.5.0
    COMMANDS=(.=ray-operator)
    CRD_DIRS=(config/crd/bases) ;;
*) die "usage: $0 volcano|training-operator|kuberay" ;;
esac

PIN="$ROOT/tools/$NAME"
CACHE_ROOT="${TEPHRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tephra}"
PIN_HASH="$(cat "$PIN"/go.{mod,sum} "$0" | sha256sum | cut -c1-12)"
DEST="$CACHE_ROOT/$NAME-$VERSION-$PIN_HASH"

built() {
    local c
    [[ -d "$DEST/crds" ]] || return 1
    for c in "${COMMANDS[@]}"; do [[ -x "$DEST/${c#*=}" ]] || return 1; done
}

if built; then echo "$DEST"; exit 0; fi
command -v go >/dev/null 2>&1 || die "the Go toolchain is required to build $NAME"

mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9
if built; then echo "$DEST"; exit 0; fi

export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
PINNED="$(cd "$PIN" && go list -m -f '{{.Version}}' "$MODULE")"
[[ "$PINNED" == "$VERSION" ]] || die "tools/$NAME pins $MODULE $PINNED, not $VERSION"
started=$SECONDS
echo "build-oracle: building $NAME $VERSION (first build only; several minutes)" >&2
rm -rf "$DEST/tmp"
mkdir -p "$DEST/tmp/bin" "$DEST/tmp/crds"
PKGS=()
for c in "${COMMANDS[@]}"; do pkg="$MODULE/${c%%=*}"; PKGS+=("${pkg%/.}"); done
# One `go build` for all of an oracle's commands, so they compile in parallel.
(cd "$PIN" && go build -trimpath -ldflags "-s -w" -o "$DEST/tmp/bin/" "${PKGS[@]}")
MODDIR="$(cd "$PIN" && go list -m -f '{{.Dir}}' "$MODULE")"
[[ -n "$MODDIR" ]] || die "$MODULE is not in the module cache"
for d in "${CRD_DIRS[@]}"; do
    for f in "$MODDIR/$d"/*.yaml; do
        # kustomization.yaml files are build instructions, not CRDs.
        if grep -q '^kind: CustomResourceDefinition' "$f"; then cp "$f" "$DEST/tmp/crds/"; fi
    done
done
chmod -R u+w "$DEST/tmp/crds"
# Publish atomically: a build cut off half-way leaves nothing that `built` would accept.
rm -rf "$DEST/crds"
mv "$DEST/tmp/crds" "$DEST/crds"
for c in "${COMMANDS[@]}"; do
    pkg="$MODULE/${c%%=*}"
    mv "$DEST/tmp/bin/$(basename "${pkg%/.}")" "$DEST/${c#*=}"
done
rmdir "$DEST/tmp/bin" "$DEST/tmp"
echo "build-oracle: built $NAME in $((SECONDS - started)) s into $DEST" >&2
echo "$DEST"
