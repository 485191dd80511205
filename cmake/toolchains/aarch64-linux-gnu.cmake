# Cross build for Linux arm64 on a Debian host (multiarch), run under qemu-user.
#
# Needs: g++-aarch64-linux-gnu, qemu-user, and the arm64 dev packages next to
# the native ones:
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install --no-install-recommends zlib1g-dev:arm64 libpcre2-dev:arm64 \
#       libfmt-dev:arm64 libcpu-features-dev:arm64
# (nlohmann-json3-dev and libcli11-dev are Architecture: all; the native
# packages serve both.) Used by tools/cross/aarch64_e2e.sh and the
# aarch64-qemu preset:
#   cmake -S . -B build-aarch64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(WASTE_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${WASTE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${WASTE_CROSS_TRIPLE}-g++)

# Debian multiarch: arm64 libraries and their CMake/pkg-config files live in
# /usr/lib/aarch64-linux-gnu, headers in /usr/include (+ the triplet
# subdirectory), arch-independent CMake packages in /usr/share/cmake. Setting
# the library architecture makes find_package/find_library search
# lib/aarch64-linux-gnu, never lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE ${WASTE_CROSS_TRIPLE})
# No CMAKE_FIND_ROOT_PATH: multiarch needs no sysroot, /usr is the root of
# both architectures.

# pkg-config (PCRE2, liburing): the host binary reading only the arm64 .pc
# files. Debian 12 has no <triplet>-pkg-config wrapper without extra packages.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${WASTE_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Anything CMake/CTest runs (gtest discovery, add_test) goes through qemu.
# No -L: libc6:arm64 (pulled in by the dev packages) provides
# /lib/ld-linux-aarch64.so.1 and every library in /usr/lib/aarch64-linux-gnu.
# -L /usr/aarch64-linux-gnu would load the cross toolchain's ld.so
# (libc6-arm64-cross, another glibc build) with the multiarch libc.so.6 found
# through ld.so.cache; their private structures differ and pthread_create
# spins forever. Keep QEMU_LD_PREFIX unset for the same reason.
find_program(WASTE_QEMU_AARCH64 qemu-aarch64)
if(WASTE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${WASTE_QEMU_AARCH64})
endif()
