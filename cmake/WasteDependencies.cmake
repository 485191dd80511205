# Every dependency comes from a Debian package, found here; nothing is fetched.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
if(WASTE_STANDALONE)
  find_package(CLI11 REQUIRED)  # the CLI's option parser only
endif()
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

# cpu_features: runtime ISA detection (libcpu-features-dev).
find_package(CpuFeatures QUIET)
if(TARGET CpuFeatures::cpu_features)
  set(WASTE_HAVE_CPU_FEATURES ON)
else()
  message(FATAL_ERROR "cpu_features not found: apt-get install libcpu-features-dev")
endif()

set(WASTE_HAVE_IO_URING OFF)
if(WASTE_ENABLE_IO_URING AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  pkg_check_modules(URING QUIET IMPORTED_TARGET liburing)
  if(URING_FOUND)
    set(WASTE_HAVE_IO_URING ON)
  endif()
endif()

# Accelerators: an option whose source does not exist stops configuration here
# with a clear message, never at link time.
foreach(accel METAL CUDA BLAS)
  if(WASTE_ENABLE_${accel})
    string(TOLOWER ${accel} name)
    set(src_file "")
    if(accel STREQUAL "METAL")
      set(src_file ${PROJECT_SOURCE_DIR}/src/kernels/backends/metal.mm)
    elseif(accel STREQUAL "CUDA")
      set(src_file ${PROJECT_SOURCE_DIR}/src/kernels/backends/cuda.cu)
    else()
      set(src_file ${PROJECT_SOURCE_DIR}/src/kernels/backends/blas.cc)
    endif()
    if(NOT EXISTS ${src_file})
      message(FATAL_ERROR "WASTE_ENABLE_${accel}=ON but ${src_file} does not exist: "
                          "the ${name} accelerator is not implemented in this tree. "
                          "Configure with -DWASTE_ENABLE_${accel}=OFF.")
    endif()
  endif()
endforeach()
