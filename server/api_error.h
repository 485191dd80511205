// An error the server answers with, in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}. Status, type, param and
// code are the contract clients rely on; the message is for people.
#pragma once

#include <optional>
#include <string>
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

}  // namespace waste::server
