#include "waste/status.h"

namespace waste {

const char* ErrcText(Errc code) noexcept {
  switch (code) {
    case Errc::kOk: return "ok";
    case Errc::kIo: return "I/O error";
    case Errc::kFormat: return "malformed container";
    case Errc::kRamBudget: return "RAM budget below the model's floor";
    case Errc::kOom: return "out of memory";
    case Errc::kArg: return "invalid argument";
    case Errc::kUnsupported: return "unsupported";
    case Errc::kCancelled: return "cancelled by callback";
    case Errc::kBusy: return "container is already open in another process";
  }
  return "unknown error";
}

const char* ErrcName(Errc code) noexcept {
  switch (code) {
    case Errc::kOk: return "ok";
    case Errc::kIo: return "io";
    case Errc::kFormat: return "format";
    case Errc::kRamBudget: return "ram_budget";
    case Errc::kOom: return "out_of_memory";
    case Errc::kArg: return "invalid_argument";
    case Errc::kUnsupported: return "unsupported";
    case Errc::kCancelled: return "cancelled";
    case Errc::kBusy: return "busy";
  }
  return "unknown";
}

std::string Status::ToString() const noexcept {
  try {
    if (message_.empty()) return ErrcText(code_);
    return std::string(ErrcText(code_)) + ": " + message_;
  } catch (...) {
    return {};  // out of memory: nothing better to say
  }
}

}  // namespace waste
