// A GBNF string literal for raw bytes: quotes and backslashes escaped,
// control bytes as \xHH. Shared by the JSON Schema compilers (schema
// values, property names, pattern characters).
#pragma once

#include <cstdio>
#include <string>

namespace waste::schema {

inline std::string GbnfLiteral(const std::string& bytes) {
  std::string out(1, '"');
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace waste::schema
