#include "json_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

namespace waste::server {
namespace {

void DumpString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void DumpValue(const Json& v, JsonStyle style, bool sort_keys, std::string* out) {
  const char* item_sep = style == JsonStyle::kCompact ? "," : ", ";
  const char* key_sep = style == JsonStyle::kCompact ? ":" : ": ";
  switch (v.type()) {
    case Json::value_t::null: *out += "null"; return;
    case Json::value_t::boolean: *out += v.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: *out += std::to_string(v.get<int64_t>()); return;
    case Json::value_t::number_unsigned: *out += std::to_string(v.get<uint64_t>()); return;
    case Json::value_t::number_float: *out += PythonFloat(v.get<double>()); return;
    case Json::value_t::string: DumpString(v.get_ref<const std::string&>(), out); return;
    case Json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const Json& item : v) {
        if (!first) *out += item_sep;
        first = false;
        DumpValue(item, style, sort_keys, out);
      }
      out->push_back(']');
      return;
    }
    case Json::value_t::object: {
      std::vector<std::pair<const std::string*, const Json*>> items;
      for (auto it = v.begin(); it != v.end(); ++it) items.emplace_back(&it.key(), &it.value());
      if (sort_keys) {
        // UTF-8 byte order equals code-point order.
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return *a.first < *b.first; });
      }
      out->push_back('{');
      bool first = true;
      for (const auto& [key, value] : items) {
        if (!first) *out += item_sep;
        first = false;
        DumpString(*key, out);
        *out += key_sep;
        DumpValue(*value, style, sort_keys, out);
      }
      out->push_back('}');
      return;
    }
    default: *out += "null"; return;
  }
}

}  // namespace

std::string PythonFloat(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits in scientific form: "-d.ddde+XX".
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant) if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp10 >= -4 && exp10 < 16) {
    int point = exp10 + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(point)) + "." +
             digits.substr(static_cast<size_t>(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + ebuf;
}

std::string Dump(const Json& value, JsonStyle style, bool sort_keys) {
  std::string out;
  DumpValue(value, style, sort_keys, &out);
  return out;
}

namespace {

// A SAX pass that only counts each open object's members and stops past
// the limit: linear in the text, before any tree is built. (A parser
// callback would do it in the same pass, but nlohmann's callback parser
// scans the parent container at the end of every object, which makes a
// wide array of small objects quadratic: 160,000 `{}` took 15 s.)
class MemberCounter : public nlohmann::json_sax<Json> {
 public:
  bool too_many = false;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    members_.push_back(0);
    return true;
  }
  bool key(string_t&) override {
    if (!members_.empty() && ++members_.back() > kMaxJsonMembers) {
      too_many = true;
      return false;
    }
    return true;
  }
  bool end_object() override {
    if (!members_.empty()) members_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // the tree parse below says where
  }

 private:
  std::vector<size_t> members_;
};

}  // namespace

std::string TooManyMembersError() {
  return "an object has more than " + std::to_string(kMaxJsonMembers) + " members";
}

bool ParseJson(std::string_view text, Json* out, std::string* error, bool* too_wide) {
  if (too_wide != nullptr) *too_wide = false;
  MemberCounter counter;
  Json::sax_parse(text.begin(), text.end(), &counter, nlohmann::detail::input_format_t::json,
                  /*strict=*/true);
  if (counter.too_many) {
    if (too_wide != nullptr) *too_wide = true;
    *error = TooManyMembersError();
    return false;
  }
  Json parsed = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    // Re-run with exceptions only to get the parser's position text.
    try {
      Json ignored = Json::parse(text.begin(), text.end());
      (void)ignored;
    } catch (const std::exception& e) {
      *error = e.what();
    }
    if (error->empty()) *error = "malformed JSON";
    return false;
  }
  *out = std::move(parsed);
  return true;
}

const Json* Field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool IsNonNegativeInteger(const Json& v) {
  return v.is_number_integer() && (v.is_number_unsigned() || v.get<int64_t>() >= 0);
}

}  // namespace waste::server
