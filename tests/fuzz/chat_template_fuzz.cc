// libFuzzer target: chat.json. ChatTemplate::Parse is noexcept and returns
// a template or an error for any bytes; a parsed template renders a prompt.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "waste/chat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = waste::ChatTemplate::Parse(text, "chat.json");
  if (t) {
    waste::PromptPlan plan = waste::BuildRunPrompt(&*t, false, "system", {}, "hello");
    if (plan.segments.empty()) __builtin_trap();
  }
  return 0;
}
