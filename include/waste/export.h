/* WASTE_EXPORT marks what the shared library exports; everything else is
 * built with hidden visibility. On ELF and Mach-O the attribute is harmless
 * when linking the static library. On Windows a DLL build defines
 * WASTE_SHARED for its users (the CMake package and waste.pc do) and
 * WASTE_BUILDING_LIBRARY while compiling waste itself. */
#ifndef WASTE_EXPORT_H_
#define WASTE_EXPORT_H_

#if defined(_WIN32) && defined(WASTE_SHARED)
#if defined(WASTE_BUILDING_LIBRARY)
#define WASTE_EXPORT __declspec(dllexport)
#else
#define WASTE_EXPORT __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define WASTE_EXPORT __attribute__((visibility("default")))
#else
#define WASTE_EXPORT
#endif

#endif /* WASTE_EXPORT_H_ */
