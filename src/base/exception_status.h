// Turning an exception caught at a no-throw boundary into a Status.
//
// The library throws nothing across its API, but the standard library and
// nlohmann::json throw inside it, and each boundary catches
// std::exception. Whatever the call was doing (parsing a manifest, writing
// a session file), running out of memory is out of memory: a std::bad_alloc
// must reach the caller as Errc::kOom, not as "malformed container" or
// "I/O error", so a host can tell "give me more RAM" from "fix the file".
#pragma once

#include <exception>
#include <new>
#include <string>
#include <utility>

#include "waste/status.h"

namespace waste {

// `code` with `message`, unless `e` is an allocation failure.
inline Status StatusFromException(const std::exception& e, Errc code, std::string message) noexcept {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return OomError(std::move(message));
  return Status(code, std::move(message));
}

}  // namespace waste
