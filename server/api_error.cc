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

}  // namespace waste::server
