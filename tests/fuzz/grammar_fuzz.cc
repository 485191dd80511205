// libFuzzer target: the grammar compilers a request can reach. The input
// is used twice: as GBNF text (`waste run --grammar`, and what the schema
// compiler emits) and as a JSON Schema (`response_format` json_schema, tool
// parameters, `waste run --json-schema`). Invariants: a schema the compiler
// accepts yields GBNF that parses, also after its rules are prefixed (how
// tools are combined); a grammar that parses still parses prefixed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "waste/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (waste::Grammar::Parse(text)) {
    // Prefixed, the start rule is t0-root; a new root refers to it.
    auto prefixed = waste::Grammar::PrefixRules(text, "t0-");
    if (prefixed && !waste::Grammar::Parse(*prefixed + "\nroot ::= t0-root\n")) __builtin_trap();
  }
  auto gbnf = waste::Grammar::JsonSchemaToGbnf(text);
  if (gbnf) {
    if (!waste::Grammar::Parse(*gbnf)) __builtin_trap();
    auto tool = waste::Grammar::JsonSchemaToGbnf(text, "tool0-");
    if (!tool || !waste::Grammar::Parse(*tool + "\nroot ::= tool0-root\n")) __builtin_trap();
  }
  return 0;
}
