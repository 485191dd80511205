#include "format/json_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <vector>

#include "format/format.h"

namespace waste::json {
namespace {

constexpr int64_t kSaturate = int64_t{1} << 62;

// SAX handler building a DOM where the first of duplicate keys wins. A
// duplicate's whole value (however deeply nested) is skipped.
class FirstWinsBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit FirstWinsBuilder(Json& root) : root_(root) {}

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) { return Put(Json(v)); }
  bool string(string_t& v) { return Put(Json(std::move(v))); }
  bool binary(binary_t&) { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t) { return Open(Json::object()); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }

  bool key(string_t& k) {
    if (skip_depth_ > 0) return true;
    Json* obj = stack_.back();
    if (obj->contains(k)) {
      skip_next_ = true;  // duplicate: the first occurrence wins
    } else {
      pending_key_ = std::move(k);
    }
    return true;
  }

  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) {
    // nlohmann quotes the offending token whole ("last read: '...'"): a
    // 1M-digit number must not come back as a 1 MB message.
    std::string what = ex.what();
    if (what.size() > 200) what = what.substr(0, 197) + "...";
    error_ = fmt::format("not valid JSON at byte {}: {}", pos, what);
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  // Places a finished value; returns where it landed (nullptr when skipped).
  Json* Place(Json&& v) {
    if (stack_.empty()) {
      if (have_root_) return nullptr;  // text after the top-level value: ignored
      root_ = std::move(v);
      have_root_ = true;
      return &root_;
    }
    Json* parent = stack_.back();
    if (parent->is_array()) {
      parent->push_back(std::move(v));
      return &parent->back();
    }
    auto [it, inserted] = parent->emplace(std::move(pending_key_), std::move(v));
    return inserted ? &it.value() : nullptr;
  }

  bool Put(Json&& v) {
    if (skip_depth_ > 0) return true;
    if (skip_next_) {
      skip_next_ = false;
      return true;
    }
    Place(std::move(v));
    return true;
  }

  bool Open(Json&& container) {
    if (++depth_ > format::kMaxManifestDepth) {
      return Fail(fmt::format("JSON nesting is deeper than {} levels", format::kMaxManifestDepth));
    }
    if (skip_depth_ > 0 || skip_next_) {
      skip_next_ = false;
      ++skip_depth_;
      return true;
    }
    Json* placed = Place(std::move(container));
    if (placed == nullptr) {
      ++skip_depth_;
      return true;
    }
    stack_.push_back(placed);
    return true;
  }

  bool Close() {
    --depth_;
    if (skip_depth_ > 0) {
      --skip_depth_;
      return true;
    }
    if (!stack_.empty()) stack_.pop_back();
    return true;
  }

  Json& root_;
  bool have_root_ = false;
  std::vector<Json*> stack_;
  std::string pending_key_;
  bool skip_next_ = false;
  int skip_depth_ = 0;
  int depth_ = 0;
  std::string error_;
};

}  // namespace

Result<Json> ParseFirstWins(std::string_view text, std::string_view origin) {
  Json root;
  FirstWinsBuilder builder(root);
  bool ok = false;
  try {
    // strict = false: the reference ignores text after the top-level value.
    ok = Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json, false);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (what.size() > 200) what = what.substr(0, 197) + "...";
    return FormatError(fmt::format("{}: not valid JSON: {}", origin, what));
  }
  if (!ok) {
    std::string why = builder.error().empty() ? "not valid JSON" : builder.error();
    return FormatError(fmt::format("{}: {}", origin, why));
  }
  return root;
}

const Json* Member(const Json* obj, std::string_view key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  auto it = obj->find(key);
  if (it == obj->end()) return nullptr;
  return &it.value();
}

std::optional<double> Number(const Json* v) {
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::optional<int64_t> Integer(const Json* v) {
  if (v == nullptr || !v->is_number()) return std::nullopt;
  if (v->is_number_integer() && !v->is_number_unsigned()) {
    int64_t i = v->get<int64_t>();
    if (i > kSaturate) return kSaturate;
    if (i < -kSaturate) return -kSaturate;
    return i;
  }
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    return u > static_cast<uint64_t>(kSaturate) ? kSaturate : static_cast<int64_t>(u);
  }
  double d = v->get<double>();
  if (std::isnan(d)) return kSaturate;
  if (d >= static_cast<double>(kSaturate)) return kSaturate;
  if (d <= -static_cast<double>(kSaturate)) return -kSaturate;
  return static_cast<int64_t>(std::trunc(d));
}

std::optional<std::string> String(const Json* v) {
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

std::string Brief(const Json* v) {
  if (v == nullptr) return "nothing";
  std::string s;
  try {
    s = v->dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception&) {
    s = "<unprintable>";
  }
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

}  // namespace waste::json
