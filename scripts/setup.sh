#!/bin/sh
# Installs the Debian packages waste needs to build, test and cross-check.
# Idempotent: packages already installed are left alone, and when nothing is
# missing it touches neither apt nor the network (works offline).
# Usage: scripts/setup.sh            (as root, or with sudo available)
set -eu

PACKAGES="build-essential cmake ninja-build pkg-config libcpu-features-dev nlohmann-json3-dev
libfmt-dev libcli11-dev zlib1g-dev libpcre2-dev liburing-dev libgtest-dev libbenchmark-dev
python3-numpy python3-regex qemu-user g++-aarch64-linux-gnu clang"

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup.sh: not a Debian system; install the equivalents of:" >&2
  echo "  $PACKAGES" | tr '\n' ' ' >&2
  echo >&2
  exit 1
fi

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "setup.sh: all build dependencies are installed"
  exit 0
fi

echo "setup.sh: installing:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup.sh: run as root (or install sudo) to install:$missing" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# shellcheck disable=SC2086  # word splitting of the package list is intended
$SUDO apt-get install -y --no-install-recommends $missing
