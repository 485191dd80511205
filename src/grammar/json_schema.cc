// JSON Schema -> GBNF. Each schema becomes an expression over a few base
// rules (string, number, value, ...); objects accept their properties in
// any order (up to kMaxAnyOrder of them; beyond that, in schema order),
// each at most once, the required ones always, and extra keys only when
// additionalProperties allows and never spelling a declared name.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/gbnf_literal.h"
#include "grammar/json_schema_bounds.h"
#include "grammar/json_schema_pattern.h"
#include "base/exception_status.h"

namespace waste {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxAnyOrder = 6;

const char* kBaseRules = R"(ws ::= [ \t\n]{0,24}
sep ::= ws "," ws
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
integer ::= "-"? ("0" | [1-9] [0-9]{0,17})
number ::= "-"? ("0" | [1-9] [0-9]{0,17}) ("." [0-9]{1,17})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value (sep string ws ":" ws value)*)? ws "}"
array ::= "[" ws (value (sep value)*)? ws "]"
never ::= [^\x00-\U0010FFFF]
strtail ::= char* "\""
date ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])
time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" ([0-5] [0-9] | "60") ("." [0-9]{1,9})? ([zZ] | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
date-time ::= date [tT ] time
uuid ::= [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}
email ::= [a-zA-Z0-9._%+-]{1,64} "@" [a-zA-Z0-9-]{1,63} ("." [a-zA-Z0-9-]{1,63}){1,4}
)";

// Keywords that only describe (never constrain) and are ignored.
const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", "$anchor", "contentMediaType", "contentEncoding",
    "name", "strict"};
const std::set<std::string> kSupported = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "prefixItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "$defs",
    "definitions", "format", "minLength", "maxLength", "nullable", "additionalItems",
    "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

using schema::GbnfLiteral;

// Compact JSON text of a value as the matcher sees it (non-ASCII raw).
std::string JsonText(const Json& v) {
  return v.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
}

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(root) {}

  Status Run(std::string* gbnf) {
    std::string expr;
    WASTE_TRY(Compile(root_, "", &expr));
    *gbnf = "root ::= " + expr + "\n" + kBaseRules;
    for (const auto& r : rules_) *gbnf += r + "\n";
    return Status::Ok();
  }

 private:
  std::string NewRule(const std::string& body) {
    std::string name = "s" + std::to_string(next_++);
    rules_.push_back(name + " ::= " + body);
    return name;
  }
  std::string Reserve() { return std::to_string(next_++).insert(0, 1, 's'); }
  void Define(const std::string& name, const std::string& body) {
    rules_.push_back(name + " ::= " + body);
  }

  Status Unsupported(const std::string& key, const std::string& path) {
    return UnsupportedError("unsupported JSON Schema keyword '" + key + "' at " +
                            (path.empty() ? "/" : path));
  }

  Status Resolve(const std::string& ref, const std::string& path, const Json** out) {
    if (ref.empty() || ref[0] != '#') {
      return UnsupportedError("only local $ref (#/...) is supported, at " + path);
    }
    try {
      std::string pointer = ref.substr(1);
      *out = pointer.empty() ? &root_ : &root_.at(Json::json_pointer(pointer));
      return Status::Ok();
    } catch (const std::exception& e) {
      return StatusFromException(e, Errc::kFormat, "$ref " + ref + " does not resolve, at " + path);
    }
  }

  Status Compile(const Json& s, const std::string& path, std::string* expr) {
    if (s.is_boolean()) {
      *expr = s.get<bool>() ? "value" : "never";
      return Status::Ok();
    }
    if (!s.is_object()) return FormatError("a schema must be an object or a boolean, at " + path);
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!kSupported.count(it.key()) && !kAnnotations.count(it.key())) {
        return Unsupported(it.key(), path);
      }
    }
    std::vector<std::string> parts;  // all must hold: only one is allowed here
    // $ref: as in draft 7, keywords beside it are ignored.
    if (auto ref = s.find("$ref"); ref != s.end()) {
      if (!ref->is_string()) return FormatError("$ref must be a string, at " + path);
      std::string name;
      auto known = refs_.find(*ref);
      if (known != refs_.end()) {
        name = known->second;
      } else {
        const Json* target = nullptr;
        WASTE_TRY(Resolve(*ref, path, &target));
        name = Reserve();
        refs_[*ref] = name;
        std::string body;
        WASTE_TRY(Compile(*target, ref->get<std::string>(), &body));
        Define(name, body);
      }
      *expr = name;
      return Status::Ok();
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_array() || it->empty()) return FormatError(std::string(key) + " must be a non-empty array, at " + path);
      std::string alts;
      for (size_t i = 0; i < it->size(); ++i) {
        std::string e;
        WASTE_TRY(Compile((*it)[i], path + "/" + key + "/" + std::to_string(i), &e));
        alts += (i ? " | " : "") + e;
      }
      parts.push_back("(" + alts + ")");
    }
    if (auto all = s.find("allOf"); all != s.end()) {
      if (!all->is_array() || all->size() != 1) return Unsupported("allOf", path);
      std::string e;
      WASTE_TRY(Compile((*all)[0], path + "/allOf/0", &e));
      parts.push_back(e);
    }
    // const / enum: the listed values (those of the declared type, if any).
    auto c = s.find("const");
    auto en = s.find("enum");
    if (c != s.end() || en != s.end()) {
      // Keywords that would narrow the listed values (a grammar of the
      // values alone would ignore them).
      for (const char* narrowing : {"pattern", "minimum", "maximum", "exclusiveMinimum",
                                    "exclusiveMaximum", "minLength", "maxLength", "format"}) {
        if (s.contains(narrowing)) {
          return UnsupportedError(std::string("enum/const together with ") + narrowing +
                                  " is not supported, at " + (path.empty() ? "/" : path));
        }
      }
      Json values = Json::array();
      if (c != s.end()) values.push_back(*c);
      if (en != s.end()) {
        if (!en->is_array() || en->empty()) return FormatError("enum must be a non-empty array, at " + path);
        for (const Json& v : *en) {
          if (c == s.end() || v == *c) values.push_back(v);
        }
        if (c != s.end() && values.size() > 1) values.erase(values.begin());
      }
      std::string alts;
      for (const Json& v : values) {
        if (OfDeclaredType(s, v)) alts += (alts.empty() ? "" : " | ") + GbnfLiteral(JsonText(v));
      }
      *expr = alts.empty() ? "never" : "(" + alts + ")";
      return Status::Ok();
    }
    bool typed = s.contains("type") || HasTypeKeywords(s);
    if (!parts.empty() && typed && !s.contains("type")) {
      // anyOf/oneOf/allOf beside keywords that constrain a type (allOf:
      // [{$ref}], "pattern": ...): both would have to hold, which one
      // grammar alternative cannot say; refused rather than one dropped.
      return UnsupportedError("combining anyOf/oneOf/allOf with sibling keywords that constrain "
                              "a type (properties, items, pattern, minimum, ...) is not "
                              "supported, at " + (path.empty() ? "/" : path));
    }
    if (parts.empty() || typed) {
      std::string e;
      WASTE_TRY(CompileTypes(s, path, &e));
      if (parts.empty() || s.contains("type")) parts.push_back(e);
    }
    if (parts.size() > 1) {
      return UnsupportedError("combining " + std::string("$ref/anyOf/oneOf/enum/const/type") +
                              " in one schema is not supported, at " + (path.empty() ? "/" : path));
    }
    *expr = parts[0];
    return Status::Ok();
  }

  // Whether `v` has one of the schema's declared types (true without `type`).
  static bool OfDeclaredType(const Json& s, const Json& v) {
    auto t = s.find("type");
    if (t == s.end()) return true;
    std::vector<std::string> types;
    if (t->is_string()) types.push_back(*t);
    else if (t->is_array()) for (const Json& x : *t) if (x.is_string()) types.push_back(x);
    for (const std::string& name : types) {
      if ((name == "null" && v.is_null()) || (name == "boolean" && v.is_boolean()) ||
          (name == "string" && v.is_string()) || (name == "array" && v.is_array()) ||
          (name == "object" && v.is_object()) || (name == "number" && v.is_number()) ||
          (name == "integer" && (v.is_number_integer() ||
                                 (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))))) {
        return true;
      }
    }
    return s.value("nullable", false) && v.is_null();
  }

  static bool HasTypeKeywords(const Json& s) {
    for (const char* k : {"properties", "required", "additionalProperties", "items", "prefixItems",
                          "minItems", "maxItems", "format", "minLength", "maxLength", "additionalItems",
                          "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(k)) return true;
    }
    return false;
  }

  Status CompileTypes(const Json& s, const std::string& path, std::string* expr) {
    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) types.push_back(*t);
      else if (t->is_array()) for (const Json& x : *t) if (x.is_string()) types.push_back(x);
      if (types.empty()) return FormatError("type must be a string or an array of strings, at " + path);
    } else {
      types = {"object", "array", "string", "number", "boolean", "null"};
    }
    if (s.value("nullable", false)) types.push_back("null");
    bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
    std::set<std::string> seen;
    std::string alts;
    for (const std::string& t : types) {
      if (!seen.insert(t).second) continue;
      if (t == "integer" && has_number) continue;
      std::string e;
      if (t == "null" || t == "boolean") e = t;
      else if (t == "integer" || t == "number") WASTE_TRY(NumberExpr(s, path, t == "integer", &e));
      else if (t == "string") WASTE_TRY(StringExpr(s, path, &e));
      else if (t == "array") WASTE_TRY(ArrayExpr(s, path, &e));
      else if (t == "object") WASTE_TRY(ObjectExpr(s, path, &e));
      else return FormatError("unknown type '" + t + "', at " + path);
      alts += (alts.empty() ? "" : " | ") + e;
    }
    *expr = types.size() == 1 ? alts : "(" + alts + ")";
    return Status::Ok();
  }

  static Status Count(const Json& s, const char* key, const std::string& path, int64_t* out) {
    auto it = s.find(key);
    if (it == s.end()) return Status::Ok();
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return FormatError(std::string(key) + " must be a non-negative integer, at " + path);
    }
    *out = it->get<int64_t>();
    if (*out > 10000) return UnsupportedError(std::string(key) + " above 10000, at " + path);
    return Status::Ok();
  }

  // minimum / maximum / exclusiveMinimum / exclusiveMaximum (a number, or
  // draft 4's boolean beside minimum / maximum); the stricter of two wins.
  // A bound's value: integers exactly (long double holds 64 bits where the
  // platform has it), others as written.
  static long double BoundValue(const Json& v) {
    if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
    if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
    return static_cast<long double>(v.get<double>());
  }

  static Status Bound(const Json& s, const char* inclusive, const char* exclusive,
                      const std::string& path, bool lower, std::optional<long double>* value,
                      bool* is_exclusive) {
    auto in = s.find(inclusive);
    auto ex = s.find(exclusive);
    if (in != s.end() && !in->is_number()) {
      return FormatError(std::string(inclusive) + " must be a number, at " + path);
    }
    if (ex != s.end() && !ex->is_number() && !ex->is_boolean()) {
      return FormatError(std::string(exclusive) + " must be a number, at " + path);
    }
    if (in != s.end()) *value = BoundValue(*in);
    if (ex != s.end() && ex->is_boolean()) {
      *is_exclusive = ex->get<bool>() && in != s.end();
    } else if (ex != s.end()) {
      long double v = BoundValue(*ex);
      if (!*value || (lower ? v >= **value : v <= **value)) {
        *value = v;
        *is_exclusive = true;
      }
    }
    if (*value && !std::isfinite(**value)) {
      return FormatError(std::string(inclusive) + " must be finite, at " + path);
    }
    return Status::Ok();
  }

  Status NumberExpr(const Json& s, const std::string& path, bool integral, std::string* e) {
    schema::NumberBounds b;
    WASTE_TRY(Bound(s, "minimum", "exclusiveMinimum", path, true, &b.lo, &b.lo_exclusive));
    WASTE_TRY(Bound(s, "maximum", "exclusiveMaximum", path, false, &b.hi, &b.hi_exclusive));
    *e = !b.lo && !b.hi ? (integral ? "integer" : "number") : schema::BoundedNumber(b, integral);
    return Status::Ok();
  }

  Status StringExpr(const Json& s, const std::string& path, std::string* e) {
    if (auto p = s.find("pattern"); p != s.end()) {
      if (!p->is_string()) return FormatError("pattern must be a string, at " + path);
      for (const char* other : {"format", "minLength", "maxLength"}) {
        if (s.contains(other)) {
          return UnsupportedError(std::string("pattern together with ") + other +
                                  " is not supported, at " + (path.empty() ? "/" : path));
        }
      }
      auto g = schema::PatternString(p->get<std::string>());
      if (!g) {
        return Status(g.error().code(), g.error().message() + ", at " + (path.empty() ? "/" : path));
      }
      *e = *g;
      return Status::Ok();
    }
    if (auto f = s.find("format"); f != s.end() && f->is_string()) {
      static const std::set<std::string> kFormats = {"date", "time", "date-time", "uuid", "email"};
      if (kFormats.count(*f)) {
        *e = "\"\\\"\" " + f->get<std::string>() + " \"\\\"\"";
        return Status::Ok();
      }
    }
    int64_t lo = 0, hi = -1;
    WASTE_TRY(Count(s, "minLength", path, &lo));
    WASTE_TRY(Count(s, "maxLength", path, &hi));
    if (lo == 0 && hi < 0) {
      *e = "string";
    } else {
      *e = "\"\\\"\" char{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "} \"\\\"\"";
    }
    return Status::Ok();
  }

  Status ArrayExpr(const Json& s, const std::string& path, std::string* e) {
    std::vector<std::string> prefix;
    if (auto p = s.find("prefixItems"); p != s.end()) {
      if (!p->is_array()) return FormatError("prefixItems must be an array, at " + path);
      for (size_t i = 0; i < p->size(); ++i) {
        std::string x;
        WASTE_TRY(Compile((*p)[i], path + "/prefixItems/" + std::to_string(i), &x));
        prefix.push_back(x);
      }
    }
    std::string item = "value";
    bool more = true;  // items beyond the prefix allowed
    auto it = s.find("items");
    if (it != s.end() && it->is_array()) {
      // Draft 7 tuple form: items = the prefix, additionalItems = the rest.
      for (size_t i = 0; i < it->size(); ++i) {
        std::string x;
        WASTE_TRY(Compile((*it)[i], path + "/items/" + std::to_string(i), &x));
        prefix.push_back(x);
      }
      auto extra = s.find("additionalItems");
      if (extra != s.end()) {
        if (extra->is_boolean() && !extra->get<bool>()) more = false;
        else WASTE_TRY(Compile(*extra, path + "/additionalItems", &item));
      }
    } else if (it != s.end()) {
      if (it->is_boolean() && !it->get<bool>()) more = false;
      else WASTE_TRY(Compile(*it, path + "/items", &item));
    }
    int64_t lo = 0, hi = -1;
    WASTE_TRY(Count(s, "minItems", path, &lo));
    WASTE_TRY(Count(s, "maxItems", path, &hi));
    int64_t limit = more ? hi : (hi < 0 ? static_cast<int64_t>(prefix.size())
                                        : std::min<int64_t>(hi, static_cast<int64_t>(prefix.size())));
    if (limit >= 0 && lo > limit) {
      *e = "never";
      return Status::Ok();
    }
    auto at = [&](int64_t i) { return i < static_cast<int64_t>(prefix.size()) ? prefix[static_cast<size_t>(i)] : item; };
    // Elements i.. are optional: nested for prefix positions, a bounded or
    // unbounded repetition of `item` after them.
    std::function<std::string(int64_t)> tail = [&](int64_t i) -> std::string {
      if (limit >= 0 && i >= limit) return "";
      if (i >= static_cast<int64_t>(prefix.size())) {
        if (limit < 0) return " (sep " + item + ")*";
        return " (sep " + item + "){0," + std::to_string(limit - i) + "}";
      }
      return " (sep " + at(i) + tail(i + 1) + ")?";
    };
    std::string body;
    if (lo == 0) {
      body = (limit == 0) ? "" : "(" + at(0) + tail(1) + ")?";
    } else {
      body = at(0);
      for (int64_t i = 1; i < lo; ++i) body += " sep " + at(i);
      body += tail(lo);
    }
    *e = NewRule("\"[\" ws " + body + " ws \"]\"");
    return Status::Ok();
  }

  // A JSON string key that is not one of `names`.
  std::string OtherKey(const std::vector<std::string>& names) {
    struct Node {
      std::map<unsigned char, int> next;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& n : names) {
      bool plain = true;
      for (unsigned char c : n) plain = plain && c >= 0x20 && c != '"' && c != '\\';
      if (!plain) continue;  // such names are not excluded (rare)
      int cur = 0;
      for (unsigned char c : n) {
        auto it = trie[static_cast<size_t>(cur)].next.find(c);
        if (it == trie[static_cast<size_t>(cur)].next.end()) {
          trie.emplace_back();
          int id = static_cast<int>(trie.size()) - 1;
          trie[static_cast<size_t>(cur)].next[c] = id;
          cur = id;
        } else {
          cur = it->second;
        }
      }
      trie[static_cast<size_t>(cur)].terminal = true;
    }
    // Byte-level: a name's multi-byte characters are matched byte by byte
    // by the trie, so only ASCII steps are taken here; a non-ASCII byte
    // leaves the trie into the free tail.
    std::vector<std::string> rule(trie.size());
    for (size_t i = 0; i < trie.size(); ++i) rule[i] = Reserve();
    for (size_t i = 0; i < trie.size(); ++i) {
      std::string alts;
      auto add = [&](const std::string& a) { alts += (alts.empty() ? "" : " | ") + a; };
      if (!trie[i].terminal) add("\"\\\"\"");
      std::string excluded = "\"\\\\\\x00-\\x1f";
      for (const auto& [c, child] : trie[i].next) {
        if (c >= 0x80) continue;
        std::string ch = GbnfLiteral(std::string(1, static_cast<char>(c)));
        add(ch + " " + rule[static_cast<size_t>(child)]);
        if (c == ']' || c == '\\' || c == '^' || c == '-' || c == '[') excluded += "\\";
        excluded.push_back(static_cast<char>(c));
      }
      add("[^" + excluded + "] strtail");
      add("\"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) strtail");
      Define(rule[i], alts);
    }
    return "\"\\\"\" " + rule[0];
  }

  Status ObjectExpr(const Json& s, const std::string& path, std::string* e) {
    std::vector<std::string> names, kvs;
    if (auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) return FormatError("properties must be an object, at " + path);
      for (auto it = p->begin(); it != p->end(); ++it) {
        std::string v;
        WASTE_TRY(Compile(it.value(), path + "/properties/" + it.key(), &v));
        names.push_back(it.key());
        kvs.push_back(GbnfLiteral(JsonText(Json(it.key()))) + " ws \":\" ws " + v);
      }
    }
    std::set<std::string> required;
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) return FormatError("required must be an array, at " + path);
      for (const Json& x : *r) if (x.is_string()) required.insert(x.get<std::string>());
    }
    for (const std::string& r : required) {
      if (std::find(names.begin(), names.end(), r) == names.end()) {
        // Required but undeclared: any value under that name.
        names.push_back(r);
        kvs.push_back(GbnfLiteral(JsonText(Json(r))) + " ws \":\" ws value");
      }
    }
    std::string extra;  // one additional "key": value, or empty
    auto ap = s.find("additionalProperties");
    if (ap == s.end() || (ap->is_boolean() && ap->get<bool>())) {
      extra = OtherKey(names) + " ws \":\" ws value";
    } else if (!ap->is_boolean()) {
      std::string v;
      WASTE_TRY(Compile(*ap, path + "/additionalProperties", &v));
      extra = OtherKey(names) + " ws \":\" ws " + v;
    }
    if (!extra.empty()) extra = NewRule(extra);
    const size_t n = names.size();
    auto is_required = [&](size_t i) { return required.count(names[i]) > 0; };
    std::string first;
    if (n <= kMaxAnyOrder) {
      // Rules per set of properties still unused, before/after the first pair.
      const uint32_t full = (1u << n) - 1;
      std::vector<std::string> rf(full + 1), ra(full + 1);
      for (uint32_t set = 0; set <= full; ++set) {
        rf[set] = Reserve();
        ra[set] = Reserve();
      }
      for (uint32_t set = 0; set <= full; ++set) {
        std::string fa, aa;
        auto add = [](std::string* to, const std::string& a) { *to += (to->empty() ? "" : " | ") + a; };
        bool can_stop = true;
        for (size_t i = 0; i < n; ++i) {
          if (!(set & (1u << i))) continue;
          if (is_required(i)) can_stop = false;
          uint32_t rest = set & ~(1u << i);
          add(&fa, kvs[i] + " " + ra[rest]);
          add(&aa, "sep " + kvs[i] + " " + ra[rest]);
        }
        if (!extra.empty()) {
          add(&fa, extra + " " + ra[set]);
          add(&aa, "sep " + extra + " " + ra[set]);
        }
        if (can_stop) {
          add(&fa, "\"\"");
          add(&aa, "\"\"");
        }
        Define(rf[set], fa.empty() ? "never" : fa);
        Define(ra[set], aa.empty() ? "never" : aa);
      }
      first = rf[full];
    } else {
      // In schema order; optional properties may be skipped.
      std::vector<std::string> rf(n + 1), ra(n + 1);
      for (size_t i = 0; i <= n; ++i) {
        rf[i] = Reserve();
        ra[i] = Reserve();
      }
      Define(rf[n], extra.empty() ? "\"\"" : "(" + extra + " " + ra[n] + ") | \"\"");
      Define(ra[n], extra.empty() ? "\"\"" : "(sep " + extra + " " + ra[n] + ") | \"\"");
      for (size_t i = n; i-- > 0;) {
        std::string fa = kvs[i] + " " + ra[i + 1];
        std::string aa = "sep " + kvs[i] + " " + ra[i + 1];
        if (!is_required(i)) {
          fa += " | " + rf[i + 1];
          aa += " | " + ra[i + 1];
        }
        Define(rf[i], fa);
        Define(ra[i], aa);
      }
      first = rf[0];
    }
    *e = NewRule("\"{\" ws " + first + " ws \"}\"");
    return Status::Ok();
  }

  const Json& root_;
  std::vector<std::string> rules_;
  std::map<std::string, std::string> refs_;
  int next_ = 0;
};

}  // namespace

Result<std::string> JsonSchemaToGbnfText(std::string_view schema) noexcept {
  try {
    Json parsed = Json::parse(schema.begin(), schema.end(), nullptr, false);
    if (parsed.is_discarded()) return FormatError("the JSON Schema is not valid JSON");
    Compiler c(parsed);
    std::string out;
    WASTE_TRY(c.Run(&out));
    return out;
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kFormat, std::string("JSON Schema: ") + e.what());
  }
}

}  // namespace waste
