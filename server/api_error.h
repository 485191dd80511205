// An error the server answers with, in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}. Status, type, param and
// code are the contract clients rely on; the message is for people.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace waste::server {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::optional<std::string> param;
  std::optional<std::string> code;
};

inline ApiError BadRequest(std::string message, std::optional<std::string> param,
                           std::optional<std::string> code = std::nullopt) {
  return ApiError{400, "invalid_request_error", std::move(message), std::move(param),
                  std::move(code)};
}

// The JSON body of an error (spaced dump, as every reply).
std::string ErrorBody(const ApiError& e);

// 400 "'param' is not supported by this server: what", code
// unsupported_parameter: a field refused rather than silently ignored.
ApiError Unsupported(const std::string& param, const std::string& what);

// Every `from` in `s` replaced by `to`, left to right, never rescanning a
// replacement (renaming fields in a passed-on error, unescaping XTML).
void ReplaceAll(std::string* s, std::string_view from, std::string_view to);

}  // namespace waste::server
