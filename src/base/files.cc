// The public face of the platform shim's whole-file read and replace
// (waste/files.h).
#include "waste/files.h"

#include <exception>
#include <new>

#include "platform/platform.h"

namespace waste {

Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                    std::string_view what, bool* missing) noexcept {
  try {
    return platform::ReadRegularFile(path, max_bytes, what, missing);
  } catch (const std::bad_alloc&) {
    return OomError(std::string(what) + " " + path + ": out of memory");
  } catch (const std::exception& e) {
    return IoError(std::string(what) + " " + path + ": " + e.what());
  }
}

Status ReplaceRegularFile(const std::string& path, std::string_view bytes,
                          std::string_view what) noexcept {
  try {
    return platform::ReplaceFile(path, bytes.data(), bytes.size(), what, "");
  } catch (const std::bad_alloc&) {
    return OomError(std::string(what) + " " + path + ": out of memory");
  } catch (const std::exception& e) {
    return IoError(std::string(what) + " " + path + ": " + e.what());
  }
}

}  // namespace waste
