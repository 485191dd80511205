/* The version of these headers (C and C++). waste_version() / Version()
 * give the version of the library actually linked. */
#ifndef WASTE_VERSION_H_
#define WASTE_VERSION_H_

#define WASTE_VERSION_MAJOR 0
#define WASTE_VERSION_MINOR 1
#define WASTE_VERSION_PATCH 0
#define WASTE_VERSION_STRING "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH (0.6.8 -> 608). */
#define WASTE_VERSION_NUMBER \
  (WASTE_VERSION_MAJOR * 10000 + WASTE_VERSION_MINOR * 100 + WASTE_VERSION_PATCH)
#define WASTE_API_VERSION 1
#define WASTE_FORMAT_VERSION 0

#endif /* WASTE_VERSION_H_ */
