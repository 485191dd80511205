#!/bin/sh
# Installs the Debian packages waste needs to build, test and cross-check.
# Idempotent: packages already installed are left alone, and when nothing is
# missing it touches neither apt nor the network (works offline).
# Usage: scripts/setup.sh            (as root, or with sudo available)
set -eu

# Needed to build and to run the core suite: setup fails if these cannot be
# installed.
PACKAGES="build-essential cmake ninja-build pkg-config libcpu-features-dev nlohmann-json3-dev
libfmt-dev libcli11-dev libedit-dev zlib1g-dev libpcre2-dev liburing-dev libgtest-dev libbenchmark-dev libstb-dev
libcpp-httplib-dev python3-numpy python3-regex"

# Needed only by checks that SKIP (and say why) without them: cross builds
# under qemu, clang for the fuzzers, the JSON-Schema conformance suite, node
# for the official openai client, chromium for the chat page. Setup tries to
# install them and warns, never fails, when it cannot: a machine with its own
# Node.js (NodeSource's nodejs bundles npm and conflicts with Debian's npm
# package) must still be able to build and test.
OPTIONAL="qemu-user g++-aarch64-linux-gnu clang json-schema-test-suite chromium"
# node and npm count as present when the commands are, whoever installed them.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  OPTIONAL="$OPTIONAL nodejs npm"
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup.sh: not a Debian system; install the equivalents of:" >&2
  echo "  $PACKAGES $OPTIONAL" | tr '\n' ' ' >&2
  echo >&2
  exit 1
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=""
for p in $PACKAGES; do
  installed "$p" || missing="$missing $p"
done
optional_missing=""
for p in $OPTIONAL; do
  installed "$p" || optional_missing="$optional_missing $p"
done

# aarch64 end-to-end under qemu (tools/cross/aarch64_e2e.sh, x86-64 hosts
# only): the arm64 halves of the engine's dependencies, Debian multiarch,
# about 12 MB with libc6:arm64. Added only where arm64 is already a foreign
# architecture or on Debian itself, whose mirrors carry arm64 (Ubuntu's
# amd64 mirrors do not: adding the architecture there breaks apt-get update);
# elsewhere the test skips and says what is missing. SETUP_CROSS=0 leaves
# them out.
CROSS_PACKAGES=""
if [ "${SETUP_CROSS:-1}" != 0 ] && [ "$(dpkg --print-architecture)" = amd64 ]; then
  if dpkg --print-foreign-architectures | grep -qx arm64 ||
     grep -qx 'ID=debian' /etc/os-release 2>/dev/null; then
    CROSS_PACKAGES="zlib1g-dev:arm64 libpcre2-dev:arm64 libfmt-dev:arm64 libcpu-features-dev:arm64"
  fi
fi
for p in $CROSS_PACKAGES; do
  installed "$p" || optional_missing="$optional_missing $p"
done

if [ -z "$missing$optional_missing" ]; then
  echo "setup.sh: all build dependencies are installed"
  exit 0
fi

echo "setup.sh: installing:$missing$optional_missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup.sh: run as root (or install sudo) to install:$missing$optional_missing" >&2
    [ -z "$missing" ] && exit 0
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
case "$optional_missing" in
  *:arm64*)
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      $SUDO dpkg --add-architecture arm64
    fi
    ;;
esac
$SUDO apt-get update
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  $SUDO apt-get install -y --no-install-recommends $missing
fi
# One at a time, so that one that cannot be had (a conflict, a mirror without
# it) does not keep the others out.
for p in $optional_missing; do
  if ! $SUDO apt-get install -y --no-install-recommends "$p" >/tmp/waste-setup-apt.log 2>&1; then
    echo "setup.sh: warning: optional package $p could not be installed;" \
         "the checks that need it will SKIP: $(tail -n 2 /tmp/waste-setup-apt.log | tr '\n' ' ')" >&2
  fi
done
echo "setup.sh: done"
