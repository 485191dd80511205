#!/bin/sh
# Packaging checks (ctest package.*), on a finished build:
#   install  BUILD SRC FIXTURES  cmake --install to a temporary prefix, then
#            build the examples through find_package(waste) and both
#            programs through `pkg-config --cflags --libs waste`, and run
#            them on the tiny fixture container when it is there.
#   subdir   BUILD SRC           configure and build a host project that
#            uses add_subdirectory(waste) and the examples.
# Ninja and the build's compiler launcher (ccache) keep it short.
set -eu
mode=$1 build=$2 src=$3 fixtures=${4:-}
work=$build/package-test/$mode
rm -rf "$work"
mkdir -p "$work"
launcher=""
if command -v ccache >/dev/null 2>&1; then
  launcher="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi

run_examples() {  # $1 = C program, $2 = C++ program
  container=$fixtures/warp-tiny-tok/container
  if [ -n "$fixtures" ] && [ -f "$container/manifest.json" ]; then
    "$1" "$container" "hello world" > "$work/c.out"
    "$2" "$container" > "$work/cpp.out"
    grep -q "^hello world" "$work/c.out"
    grep -q "stopped" "$work/cpp.out"
    echo "examples ran on $container"
  else
    echo "fixtures absent: examples built but not run"
  fi
}

case $mode in
  install)
    cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
    test -f "$work/prefix/include/waste.h"
    test -f "$work/prefix/include/waste/model.h"
    test ! -e "$work/prefix/include/model"   # src/ headers stay private
    libdir=$(ls -d "$work"/prefix/lib*/cmake/waste | head -n 1)
    libdir=${libdir%/cmake/waste}
    ls "$libdir"/libwaste.* > /dev/null
    # find_package
    cmake -S "$src/examples" -B "$work/find" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" $launcher > "$work/find.log"
    cmake --build "$work/find" >> "$work/find.log"
    run_examples "$work/find/waste_example_generate" "$work/find/waste_example_sessions"
    # pkg-config
    export PKG_CONFIG_PATH="$libdir/pkgconfig"
    flags=$(pkg-config --cflags --libs waste)
    cc -std=c11 -o "$work/generate_pc" "$src/examples/generate.c" $flags
    c++ -std=c++20 -o "$work/sessions_pc" "$src/examples/sessions.cc" $flags
    run_examples "$work/generate_pc" "$work/sessions_pc"
    ;;
  subdir)
    # The host's build folder sits beside BUILD (same depth, so the same
    # relative source paths): ccache then serves the library's objects from
    # the main build's compilations (seconds instead of a full rebuild).
    host="${build%/}-package-host"
    rm -rf "$host"
    cmake -S "$src/tests/package/host" -B "$host" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DWASTE_SOURCE_DIR="$src" $launcher > "$work/host.log"
    cmake --build "$host" -j 2 >> "$work/host.log"
    run_examples "$host/examples/waste_example_generate" "$host/examples/waste_example_sessions"
    rm -rf "$host"
    ;;
  *)
    echo "usage: $0 install|subdir BUILD SRC [FIXTURES]" >&2
    exit 2
    ;;
esac
echo "package test $mode: ok"
