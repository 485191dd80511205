// The public Grammar entry points (waste/grammar.h).
#include "grammar/grammar_data.h"
#include "grammar/json_schema.h"

namespace waste {

Result<std::shared_ptr<const Grammar>> Grammar::Parse(std::string_view text) noexcept {
  auto data = ParseGbnf(text);
  if (!data) return data.error();
  try {
    return std::make_shared<const Grammar>(*data);
  } catch (...) {
    return OomError("grammar");
  }
}

Result<std::string> Grammar::JsonSchemaToGbnf(std::string_view schema) noexcept {
  return JsonSchemaToGbnfText(schema);
}

Result<std::shared_ptr<const Grammar>> Grammar::FromJsonSchema(std::string_view schema) noexcept {
  auto text = JsonSchemaToGbnfText(schema);
  if (!text) return text.error();
  return Parse(*text);
}

std::shared_ptr<const Grammar> Grammar::AnyJsonObject() noexcept {
  static const std::shared_ptr<const Grammar> g = [] {
    auto r = FromJsonSchema(R"({"type": "object"})");
    return r ? *r : nullptr;
  }();
  return g;
}

}  // namespace waste
