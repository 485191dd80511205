// libFuzzer target: chat.json. ChatTemplate::Parse is noexcept and returns
// a template or an error for any bytes; every string of a parsed template
// comes from the input, so none can be longer than it. (Prompt rendering
// moved to the CLI, cli/prompt_plan.cc, with the Model/Session split.)
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "waste/chat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = waste::ChatTemplate::Parse(text, "chat.json");
  if (t) {
    for (const std::string* f : {&t->system_prefix, &t->system_suffix, &t->user_prefix,
                                 &t->user_suffix, &t->assistant_prefix, &t->assistant_suffix,
                                 &t->open}) {
      if (f->size() > size) __builtin_trap();
    }
    (void)t->usable();
  }
  return 0;
}
