// Status and Result<T>: how every fallible waste function reports failure.
// Errc values mirror the reference's status codes (ENGINE.md §10) and never
// change: hosts and the CLI's exit status depend on them. Nothing throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "waste/export.h"

namespace waste {

enum class Errc : int {
  kOk = 0,
  kIo = -1,           // "I/O error"
  kFormat = -2,       // "malformed container"
  kRamBudget = -3,    // "RAM budget below the model's floor"
  kOom = -4,          // "out of memory"
  kArg = -5,          // "invalid argument"
  kUnsupported = -6,  // "unsupported"
  kCancelled = -7,    // "cancelled by callback"
  kBusy = -8,         // "container is already open in another process"
};

// The fixed short text for a code (the reference's waste_strerror).
WASTE_EXPORT const char* ErrcText(Errc code) noexcept;
// A stable identifier for a code, for programs to match on: "io", "format",
// "ram_budget", "out_of_memory", "invalid_argument", "unsupported",
// "cancelled", "busy" ("ok" for kOk). The CLI's --json errors carry it.
WASTE_EXPORT const char* ErrcName(Errc code) noexcept;

// The routed expert record a failure is about, numbered as the container
// numbers them (layer index in the model, expert index in that layer).
struct ExpertFailureInfo {
  int layer = -1;
  int expert = -1;
  bool operator==(const ExpertFailureInfo&) const = default;
};

// A code plus a message that names what is wrong and where.
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(Errc code, std::string message) noexcept
      : code_(code), message_(std::move(message)) {}
  // A failure of one expert record (read error, short read, damaged header,
  // checksum mismatch): the message names it in words, `expert` as data.
  Status(Errc code, std::string message, ExpertFailureInfo expert) noexcept
      : code_(code), message_(std::move(message)), expert_(expert) {}

  static Status Ok() noexcept { return Status(); }

  bool ok() const noexcept { return code_ == Errc::kOk; }
  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "<ErrcText>: <message>" or just the text when there is no message.
  WASTE_EXPORT std::string ToString() const noexcept;
  // Which expert record failed, when the failure is one record's (then the
  // message starts "expert E of layer L: "); empty for every other failure
  // and for Ok. Read this instead of matching the message text.
  const std::optional<ExpertFailureInfo>& failed_expert() const noexcept { return expert_; }

 private:
  Errc code_ = Errc::kOk;
  std::string message_;
  std::optional<ExpertFailureInfo> expert_;
};

inline Status IoError(std::string m) noexcept { return Status(Errc::kIo, std::move(m)); }
inline Status FormatError(std::string m) noexcept { return Status(Errc::kFormat, std::move(m)); }
inline Status ArgError(std::string m) noexcept { return Status(Errc::kArg, std::move(m)); }
inline Status UnsupportedError(std::string m) noexcept {
  return Status(Errc::kUnsupported, std::move(m));
}
inline Status OomError(std::string m) noexcept { return Status(Errc::kOom, std::move(m)); }

// Spelled like std::expected so a move to C++23 is a rename.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) noexcept : v_(std::move(value)) {}           // NOLINT
  Result(Status status) noexcept : v_(std::move(status)) {}    // NOLINT

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  // value() on an error, or error() on a value, is a bug in the caller: it
  // ends the process (std::terminate) rather than throwing.
  T& value() & noexcept { return std::get<0>(v_); }
  const T& value() const& noexcept { return std::get<0>(v_); }
  T&& value() && noexcept { return std::get<0>(std::move(v_)); }
  T& operator*() & noexcept { return value(); }
  const T& operator*() const& noexcept { return value(); }
  T* operator->() noexcept { return &value(); }
  const T* operator->() const noexcept { return &value(); }
  const Status& error() const noexcept { return std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace waste

#define WASTE_CONCAT_INNER_(a, b) a##b
#define WASTE_CONCAT_(a, b) WASTE_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function when it failed.
#define WASTE_TRY(expr)                              \
  do {                                               \
    ::waste::Status waste_try_status_ = (expr);      \
    if (!waste_try_status_.ok()) return waste_try_status_; \
  } while (0)

#define WASTE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.has_value()) return tmp.error();          \
  lhs = std::move(tmp).value()

// `WASTE_ASSIGN_OR_RETURN(auto x, Foo());`
#define WASTE_ASSIGN_OR_RETURN(lhs, expr) \
  WASTE_ASSIGN_OR_RETURN_IMPL_(WASTE_CONCAT_(waste_result_, __LINE__), lhs, expr)
