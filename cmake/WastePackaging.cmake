# Installation: the library (static, or shared with BUILD_SHARED_LIBS), the
# public headers (include/ alone), wasteConfig.cmake + version file for
# find_package(waste), and waste.pc for pkg-config. Included by the
# top-level CMakeLists.txt when WASTE_INSTALL is on.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(WASTE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/waste)

install(TARGETS waste_lib EXPORT wasteTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# waste/convert.h is the converter's (waste_convert, not installed): a header
# whose functions the package cannot link would only mislead.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "convert.h" EXCLUDE)
install(EXPORT wasteTargets NAMESPACE waste:: DESTINATION ${WASTE_CMAKE_DIR})

if(BUILD_SHARED_LIBS)
  set(WASTE_PACKAGE_SHARED ON)
else()
  set(WASTE_PACKAGE_SHARED OFF)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/wasteConfig.cmake.in
  ${PROJECT_BINARY_DIR}/wasteConfig.cmake INSTALL_DESTINATION ${WASTE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wasteConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wasteConfig.cmake ${PROJECT_BINARY_DIR}/wasteConfigVersion.cmake
  DESTINATION ${WASTE_CMAKE_DIR})

# pkg-config. The libraries libwaste itself links: with a shared library
# they only matter for --static (Requires.private / Libs.private); a static
# library always needs them, so there they are part of the plain --libs.
set(pc_requires "libpcre2-8 zlib fmt")
if(WASTE_HAVE_IO_URING)
  string(APPEND pc_requires " liburing")
endif()
set(pc_libs "-lcpu_features -lstdc++ -lm -pthread")
if(BUILD_SHARED_LIBS)
  set(WASTE_PC_REQUIRES "Requires.private: ${pc_requires}")
  set(WASTE_PC_LIBS "")
  set(WASTE_PC_LIBS_PRIVATE "${pc_libs}")
  set(WASTE_PC_CFLAGS "-DWASTE_SHARED")
else()
  set(WASTE_PC_REQUIRES "Requires: ${pc_requires}")
  set(WASTE_PC_LIBS "${pc_libs}")
  set(WASTE_PC_LIBS_PRIVATE "${pc_libs}")
  set(WASTE_PC_CFLAGS "")
endif()
# Relocatable: the prefix is found from the .pc file's own place, so
# `cmake --install --prefix DIR` works whatever CMAKE_INSTALL_PREFIX was.
file(RELATIVE_PATH WASTE_PC_PREFIX_FROM_PCDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" WASTE_PC_PREFIX_FROM_PCDIR "${WASTE_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/waste.pc.in ${PROJECT_BINARY_DIR}/waste.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/waste.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
