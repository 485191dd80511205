// Parses manifest JSON the way FORMAT.md §3.1 describes the reference
// dialect where it matters for meaning: the FIRST occurrence of a duplicate
// key wins, and nesting deeper than 64 levels is refused. Typed getters read
// a key of the wrong type as absent (the reference's rule), so callers get
// defaults and then the bounds checks speak. Never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "waste/status.h"

namespace waste::json {

using Json = nlohmann::json;

// `origin` names the file in error messages ("manifest.json").
Result<Json> ParseFirstWins(std::string_view text, std::string_view origin);

// Member `key` of an object, or nullptr (also when `obj` is not an object).
const Json* Member(const Json* obj, std::string_view key);

// A JSON number (booleans are not numbers), else nullopt.
std::optional<double> Number(const Json* v);
// A number truncated toward zero (the reference's atof-then-cast). Values
// beyond +-2^62 and non-finite ones saturate to +-2^62 so every bounds check
// that follows refuses them instead of overflowing.
std::optional<int64_t> Integer(const Json* v);
// A string, else nullopt.
std::optional<std::string> String(const Json* v);

// Short rendering of a value for messages (truncated to ~40 characters).
std::string Brief(const Json* v);

}  // namespace waste::json
