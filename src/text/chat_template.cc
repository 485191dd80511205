// chat.json and the ENGINE.md §1.5 segment lists (include/waste/chat.h).
// Needs no tokenizer: segment lists become ids in Engine::TokenizeSegments.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <utility>

#include "waste/chat.h"
#include "waste/files.h"
#include "platform/platform.h"
#include "base/exception_status.h"

namespace waste {
namespace {

Status ReadPair(const nlohmann::json& doc, const char* key, std::string_view name,
                std::string* prefix, std::string* suffix) {
  const auto it = doc.find(key);
  if (it == doc.end()) return Status::Ok();
  if (!it->is_array() || it->size() != 2 || !(*it)[0].is_string() || !(*it)[1].is_string()) {
    return FormatError(std::string(name) + ": \"" + key +
                       "\" must be a [prefix, suffix] pair of strings");
  }
  *prefix = (*it)[0].get<std::string>();
  *suffix = (*it)[1].get<std::string>();
  return Status::Ok();
}

Result<ChatTemplate> ParseImpl(std::string_view json, std::string_view name) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return FormatError(std::string(name) + ": not valid JSON");
  if (!doc.is_object()) return FormatError(std::string(name) + ": expected a JSON object");
  ChatTemplate t;
  WASTE_TRY(ReadPair(doc, "system", name, &t.system_prefix, &t.system_suffix));
  WASTE_TRY(ReadPair(doc, "user", name, &t.user_prefix, &t.user_suffix));
  WASTE_TRY(ReadPair(doc, "assistant", name, &t.assistant_prefix, &t.assistant_suffix));
  for (auto [key, field] : {std::pair{"open", &t.open}, std::pair{"begin", &t.begin}}) {
    const auto it = doc.find(key);
    if (it == doc.end()) continue;
    if (!it->is_string()) {
      return FormatError(std::string(name) + ": \"" + key + "\" must be a string");
    }
    *field = it->get<std::string>();
  }
  WASTE_TRY(ReadPair(doc, "think", name, &t.think_open, &t.think_close));
  if (t.think_open.empty() != t.think_close.empty()) {
    return FormatError(std::string(name) + ": \"think\" needs both its open and close tag");
  }
  return t;
}

// The built-in formats, most specific first. Each is what the model
// maker's own chat template writes for a plain conversation (the Jinja
// files the releases ship; docs/CHAT_FORMATS.md quotes the parts used).
struct StockFormat {
  const char* name;
  ChatTemplate tmpl;
  std::vector<const char*> markers;  // each must be one special token
};

std::vector<StockFormat> StockFormats() {
  std::vector<StockFormat> formats;
  {
    // Kimi-Linear, Kimi-K2(-Instruct), Kimi-K2-Thinking: ChatML-like turns
    // with role names; K2-Thinking opens its reply with <think>.
    ChatTemplate t;
    t.system_prefix = "<|im_system|>system<|im_middle|>";
    t.system_suffix = "<|im_end|>";
    t.user_prefix = "<|im_user|>user<|im_middle|>";
    t.user_suffix = "<|im_end|>";
    t.assistant_prefix = "<|im_assistant|>assistant<|im_middle|>";
    t.assistant_suffix = "<|im_end|>";
    t.open = t.assistant_prefix;
    t.think_open = "<think>";
    t.think_close = "</think>";
    t.stock_name = "kimi";
    formats.push_back({"kimi", t,
                       {"<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>",
                        "<|im_end|>"}});
  }
  {
    // DeepSeek-V3 and R1: BOS, the system text bare, then <｜User｜> and
    // <｜Assistant｜> turns; only the assistant's ends (with EOS). R1
    // opens its reply with <think>.
    ChatTemplate t;
    t.begin = "<｜begin▁of▁sentence｜>";
    t.user_prefix = "<｜User｜>";
    t.assistant_prefix = "<｜Assistant｜>";
    t.assistant_suffix = "<｜end▁of▁sentence｜>";
    t.open = t.assistant_prefix;
    t.think_open = "<think>";
    t.think_close = "</think>";
    t.stock_name = "deepseek";
    formats.push_back({"deepseek", t,
                       {"<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
                        "<｜end▁of▁sentence｜>"}});
  }
  return formats;
}

// The whole file (a regular file within the sidecar limit); `missing`
// when it does not exist.
Result<std::string> ReadFile(const std::string& path, bool* missing) {
  return platform::ReadRegularFile(path, kMaxSidecarBytes, "chat template", missing);
}

}  // namespace

Result<ChatTemplate> ChatTemplate::Parse(std::string_view json, std::string_view name) noexcept {
  try {
    return ParseImpl(json, name);
  } catch (const std::bad_alloc&) {
    return OomError(std::string(name) + ": out of memory");
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kFormat, std::string(name) + ": " + e.what());
  }
}

Result<std::optional<ChatTemplate>> ChatTemplate::Load(const std::string& container_dir) noexcept {
  try {
    const std::string path = (container_dir.empty() ? "." : container_dir) + "/chat.json";
    bool missing = false;
    Result<std::string> text = ReadFile(path, &missing);
    if (!text) {
      if (missing) return std::optional<ChatTemplate>();
      return text.error();
    }
    WASTE_ASSIGN_OR_RETURN(ChatTemplate t, Parse(*text, path));
    return std::optional<ChatTemplate>(std::move(t));
  } catch (const std::exception&) {
    return OomError(container_dir + "/chat.json: out of memory");
  }
}

std::optional<ChatTemplate> ChatTemplate::Stock(
    const std::function<bool(std::string_view)>& is_special) noexcept try {
  for (const StockFormat& f : StockFormats()) {
    if (std::all_of(f.markers.begin(), f.markers.end(),
                    [&](const char* m) { return is_special(m); })) {
      return f.tmpl;
    }
  }
  return std::nullopt;
} catch (...) {
  return std::nullopt;
}

Result<std::optional<ChatTemplate>> ChatTemplate::ForContainer(
    const std::string& container_dir, const std::function<bool(std::string_view)>& is_special) noexcept {
  WASTE_ASSIGN_OR_RETURN(std::optional<ChatTemplate> loaded, Load(container_dir));
  if (loaded) return loaded;
  return Stock(is_special);
}

std::string ChatTemplate::Source(const std::string& container_dir) const {
  if (!stock_name.empty()) return "the built-in " + stock_name + " format";
  return (container_dir.empty() ? "." : container_dir) + "/chat.json";
}

std::vector<std::string> ChatTemplate::ReplyStops() const noexcept try {
  std::vector<std::string> stops;
  auto add = [&](const std::string& s) {
    if (!s.empty() && std::find(stops.begin(), stops.end(), s) == stops.end()) stops.push_back(s);
  };
  add(assistant_suffix);
  // Not the assistant's own header: a weak model may repeat it before its
  // answer, which is not the end of the reply.
  for (const std::string* header : {&user_prefix, &system_prefix}) add(*header);
  return stops;
} catch (...) {
  return {};
}

std::string MediaBlock(int width, int height) noexcept {
  std::string block = "<|media_begin|>image";
  if (width > 0 && height > 0) {
    block.append(" ").append(std::to_string(width)).append("x").append(std::to_string(height));
  }
  return block + "<|media_content|><|media_pad|><|media_end|>";
}

}  // namespace waste
