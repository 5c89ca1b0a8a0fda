#!/usr/bin/env bash
# Install the Debian packages lingen needs, if any is missing.
#   install-deps.sh run    to build and run lingen (scripts/plot_compare.py also wants python3-matplotlib)
#   install-deps.sh test   to run the tests too (cmocka, PyTorch for the reference, Open MPI for
#                          the MPI build's test, pkg-config and PIL for liblingen's)
set -euo pipefail
PKGS="build-essential libopenblas-dev libcjson-dev libpng-dev libgif-dev zlib1g-dev libstb-dev python3 python3-matplotlib"
[ "${1:-test}" = test ] && PKGS="$PKGS libcmocka-dev python3-torch python3-numpy python3-pil pkg-config libopenmpi-dev openmpi-bin"
missing=()
for p in $PKGS; do dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
