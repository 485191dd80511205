// JSON text the way the K3 prompt protocol and OpenAI clients see it.
//
// Prompts embed JSON (tool declarations, schemas, argument values) and the
// model was trained on one exact serialisation: Python's json.dumps with
// non-ASCII left raw, in a compact (",", ":") or spaced (", ", ": ") form.
// Dump() reproduces it byte for byte, including Python's float repr
// (shortest round-trip digits, positional for exponents in [-4, 16)).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace waste::server {

using Json = nlohmann::ordered_json;

enum class JsonStyle { kCompact, kSpaced };

// `sort_keys`: every object at every depth in code-point key order.
std::string Dump(const Json& value, JsonStyle style, bool sort_keys = false);

// Python's repr of a double ("1.5", "100.0", "1e-07", "NaN").
std::string PythonFloat(double v);

// A request field: the member `name` of `body` when present and not null,
// else nullptr (OpenAI treats an explicit null as absent).
const Json* Field(const Json& body, const char* name);

// An integer >= 0 (a count, a cap): what several request fields must be.
bool IsNonNegativeInteger(const Json& v);

// Parses request JSON the permissive way clients expect (duplicate keys
// keep the last value). Returns false and sets `error` on failure,
// including an object with more than kMaxJsonMembers members (then
// *too_wide, when given, is set): objects keep their members in order
// (ordered_json), so each insertion scans those before it, and a body of a
// million keys would hold a thread for hours.
inline constexpr size_t kMaxJsonMembers = 10000;
bool ParseJson(std::string_view text, Json* out, std::string* error, bool* too_wide = nullptr);
// The error ParseJson gives for such an object.
std::string TooManyMembersError();

}  // namespace waste::server
