// The one translation unit that compiles stb_image (from the system's
// libstb-dev; never a copy in this tree). The reference engine builds it
// with HDR, PIC and PNM support off; so do we, so the same files are
// accepted and refused. No stdio: image_decode.cc reads files itself.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_NO_HDR
#define STBI_NO_PIC
#define STBI_NO_PNM
#define STBI_NO_LINEAR
#define STBI_NO_STDIO
#include <stb_image.h>

#include "vision/stb_bridge.h"

namespace waste::vision::stb {

int Info(const unsigned char* data, int len, int* w, int* h, int* comp) {
  return stbi_info_from_memory(data, len, w, h, comp);
}

unsigned char* LoadRgb(const unsigned char* data, int len, int* w, int* h) {
  int comp = 0;
  return stbi_load_from_memory(data, len, w, h, &comp, 3);
}

void Free(void* p) { stbi_image_free(p); }

const char* FailureReason() { return stbi_failure_reason(); }

}  // namespace waste::vision::stb
