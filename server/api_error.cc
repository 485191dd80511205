#include "api_error.h"

#include "json_text.h"

namespace waste::server {

std::string ErrorBody(const ApiError& e) {
  Json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param ? Json(*e.param) : Json(nullptr)},
              {"code", e.code ? Json(*e.code) : Json(nullptr)}};
  return Dump(Json{{"error", err}}, JsonStyle::kSpaced);
}

ApiError Unsupported(const std::string& param, const std::string& what) {
  return BadRequest("'" + param + "' is not supported by this server: " + what, param,
                    "unsupported_parameter");
}

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
    s->replace(at, from.size(), to);
  }
}

}  // namespace waste::server
