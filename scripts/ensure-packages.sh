#!/usr/bin/env bash
# Install Debian packages the suite needs when their command is missing, idempotently.
# Usage: scripts/ensure-packages.sh COMMAND=PACKAGE...   e.g. unzip=unzip chromium=chromium
set -euo pipefail

missing=()
for pair in "$@"; do
    command -v "${pair%%=*}" >/dev/null 2>&1 || missing+=("${pair#*=}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
command -v apt-get >/dev/null 2>&1 \
    || { echo "ensure-packages: missing ${missing[*]} and no apt-get to install them" >&2; exit 1; }
echo "ensure-packages: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq "${missing[@]}" >/dev/null
