#include "chat_format.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace waste::cli {
namespace {

using nlohmann::json;

void Add(std::vector<Segment>* out, const std::string& text, bool markup) {
  if (!text.empty()) out->push_back({text, markup});
}

// "key": ["prefix", "suffix"]; false when present but the wrong shape.
bool Pair(const json& j, const char* key, std::string* prefix, std::string* suffix) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_array() || it->size() > 2) return false;
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) return false;
  }
  if (it->size() > 0) *prefix = (*it)[0].get<std::string>();
  if (it->size() > 1) *suffix = (*it)[1].get<std::string>();
  return true;
}

}  // namespace

ChatFormat ParseChatFormat(const std::string& json_text, std::string* error) {
  ChatFormat f;
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "chat.json is not a JSON object";
    return f;
  }
  if (!Pair(j, "system", &f.system_prefix, &f.system_suffix) ||
      !Pair(j, "user", &f.user_prefix, &f.user_suffix) ||
      !Pair(j, "assistant", &f.assistant_prefix, &f.assistant_suffix)) {
    *error = "chat.json: system/user/assistant must be [prefix, suffix] string pairs";
    return ChatFormat();
  }
  auto open = j.find("open");
  if (open != j.end() && !open->is_null()) {
    if (!open->is_string()) {
      *error = "chat.json: \"open\" must be a string";
      return ChatFormat();
    }
    f.open = open->get<std::string>();
  }
  f.present = true;
  return f;
}

ChatFormat LoadChatFormat(const std::string& model_dir, std::string* error) {
  std::ifstream in(model_dir + "/chat.json", std::ios::binary);
  if (!in) return ChatFormat();
  std::ostringstream text;
  text << in.rdbuf();
  return ParseChatFormat(text.str(), error);
}

std::vector<Segment> SystemTurn(const ChatFormat& f, const std::string& system) {
  std::vector<Segment> out;
  if (system.empty()) return out;
  Add(&out, f.system_prefix, true);
  Add(&out, system, false);
  Add(&out, f.system_suffix, true);
  return out;
}

std::vector<Segment> TemplatedPrompt(const ChatFormat& f, const std::string& system,
                                     const std::string& prompt) {
  std::vector<Segment> out = SystemTurn(f, system);
  Add(&out, f.user_prefix, true);
  Add(&out, prompt, false);
  Add(&out, f.user_suffix, true);
  Add(&out, f.open, true);
  return out;
}

std::vector<Segment> RawPrompt(const std::string& prompt) {
  std::vector<Segment> out;
  Add(&out, prompt, true);
  return out;
}

std::vector<Segment> ChatTurn(const ChatFormat& f, const std::string& line) {
  std::vector<Segment> out;
  Add(&out, f.user_prefix, true);
  Add(&out, line, false);
  Add(&out, f.user_suffix, true);
  Add(&out, f.open.empty() ? f.assistant_prefix : f.open, true);
  return out;
}

}  // namespace waste::cli
