#!/usr/bin/env bash
# Copy the generated CRDs (crds/, made by `tephra crds --out crds/`) into the chart
# (charts/tephra/crds/), which Helm installs before the chart's templates.
#
# Helm cannot read files outside the chart directory, so the chart carries a byte-for-byte copy;
# tests/charts/test_crds.py fails when the two differ. Run this after regenerating crds/.
set -euo pipefail
cd "$(dirname "$0")/.."

src="crds"
dst="charts/tephra/crds"
mkdir -p "$dst"
shopt -s nullglob
# Remove copies whose source is gone, then copy every source file.
for f in "$dst"/*.yaml "$dst"/*.yml; do
    [[ -e "$src/$(basename "$f")" ]] || { rm -f "$f"; echo "removed $f"; }
done
n=0
for f in "$src"/*.yaml "$src"/*.yml; do
    cp "$f" "$dst/"
    n=$((n + 1))
done
echo "synced $n CRD file(s) from $src/ to $dst/"
