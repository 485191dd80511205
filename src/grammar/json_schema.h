// JSON Schema -> GBNF text (see waste/grammar.h for what is supported).
#pragma once

#include <string>
#include <string_view>

#include "waste/status.h"

namespace waste {

Result<std::string> JsonSchemaToGbnfText(std::string_view schema) noexcept;

}  // namespace waste
