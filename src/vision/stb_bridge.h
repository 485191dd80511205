// A narrow C++ face over stb_image (stb_image_impl.cc), so the rest of the
// tree never includes the library header and its macros.
#pragma once

namespace waste::vision::stb {

// 1 and the header's width, height, channel count, or 0.
int Info(const unsigned char* data, int len, int* w, int* h, int* comp);
// RGB8 pixels (free with Free) or null; FailureReason() says why.
unsigned char* LoadRgb(const unsigned char* data, int len, int* w, int* h);
void Free(void* p);
const char* FailureReason();

}  // namespace waste::vision::stb
