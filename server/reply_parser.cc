#include "reply_parser.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>

#include "api_error.h"

namespace waste::server {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string Trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && IsSpace(s[a])) ++a;
  while (b > a && IsSpace(s[b - 1])) --b;
  return std::string(s.substr(a, b - a));
}

struct Header {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  const std::string* Get(const char* key) const {
    for (const auto& [k, v] : attrs) if (k == key) return &v;
    return nullptr;
  }
};

// name, then key="value" or key=value pairs; &quot; then &amp; unescaped.
Header ParseHeader(const std::string& raw) {
  Header h;
  std::string s = Trim(raw);
  size_t sp = s.find(' ');
  if (sp == std::string::npos) {
    h.name = s;
    return h;
  }
  h.name = s.substr(0, sp);
  size_t i = sp;
  while (true) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    size_t eq = s.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = Trim(std::string_view(s).substr(i, eq - i));
    std::string value;
    size_t j = eq + 1;
    if (j < s.size() && s[j] == '"') {
      size_t close = s.find('"', j + 1);
      if (close == std::string::npos) close = s.size();
      value = s.substr(j + 1, close - j - 1);
      i = close + 1;
    } else {
      size_t end = s.find(' ', j);
      if (end == std::string::npos) end = s.size();
      value = s.substr(j, end - j);
      i = end;
    }
    ReplaceAll(&value, "&quot;", "\"");
    ReplaceAll(&value, "&amp;", "&");
    if (!key.empty()) {
      auto it = std::find_if(h.attrs.begin(), h.attrs.end(),
                             [&](const auto& kv) { return kv.first == key; });
      if (it != h.attrs.end()) it->second = value;
      else h.attrs.emplace_back(key, value);
    }
    if (i >= s.size()) break;
  }
  return h;
}

// typed(text, type): the argument value an XTML argument element carries.
Json Typed(const std::string& text, const std::string& type) {
  if (type == "string") return text;
  if (type == "null") return nullptr;
  if (type == "boolean") {
    std::string t = Trim(text);
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (t == "true") return true;
    if (t == "false") return false;
    return text;
  }
  Json v;
  std::string err;
  if (ParseJson(Trim(text), &v, &err)) return v;
  return text;
}

bool ParseIndex(const std::string& s, int* out) {
  std::string t = Trim(s);
  if (t.empty()) return false;
  size_t i = 0;
  if (t[0] == '+' || t[0] == '-') i = 1;
  if (i == t.size()) return false;
  for (size_t k = i; k < t.size(); ++k) if (!std::isdigit(static_cast<unsigned char>(t[k]))) return false;
  try {
    *out = std::stoi(t);
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace

std::string NewCallId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static std::atomic<uint64_t> counter{0};
  uint64_t a = rng() ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ULL);
  uint64_t b = rng();
  char buf[40];
  std::snprintf(buf, sizeof buf, "call_%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b & 0xffffffffULL));
  return buf;
}

std::string ParsedCall::ArgumentsString() const {
  if (cut && json_block) return *json_block;
  if (json_block) {
    Json v;
    std::string err;
    // A block that is valid JSON is passed on verbatim; one that is not
    // would break every client that parses `arguments`.
    if (ParseJson(*json_block, &v, &err)) return *json_block;
  }
  return Dump(arguments, JsonStyle::kSpaced);
}

ReplyParser::ReplyParser(XtmlMarkers markers, bool think_channel) : m_(markers) {
  stack_.push_back(think_channel ? "think" : "response");
}

ReplyParser::ReplyParser(int stop_id, std::string think_open, std::string think_close)
    : xtml_(false),
      stop_id_(stop_id),
      think_open_(std::move(think_open)),
      think_close_(std::move(think_close)),
      tag_state_(think_open_.empty() || think_close_.empty() ? TagState::kContent
                                                             : TagState::kStart) {}

std::string KimiCallName(std::string_view id) {
  const size_t colon = id.rfind(':');
  if (colon != std::string_view::npos) id = id.substr(0, colon);
  const size_t dot = id.rfind('.');
  if (dot != std::string_view::npos) id = id.substr(dot + 1);
  return Trim(id);
}

void ReplyParser::EnableKimiTools(const KimiToolMarkers& markers, int max_calls) {
  kimi_ = markers;
  max_calls_ = max_calls;
}

void ReplyParser::Push(int id, std::string_view piece) {
  if (done_) return;
  if (!xtml_) {
    if (id == stop_id_) {
      done_ = true;
    } else if (kimi_.ok() && (id == kimi_.section_begin || id == kimi_.section_end ||
                              id == kimi_.call_begin || id == kimi_.argument_begin ||
                              id == kimi_.call_end)) {
      KimiMarker(id);
    } else if (kimi_phase_ == KimiPhase::kId || kimi_phase_ == KimiPhase::kArguments) {
      kimi_text_.append(piece);
    } else if (kimi_phase_ == KimiPhase::kNone && !in_calls_section_) {
      EmitTagged(piece);
    }
    return;
  }
  if (id == m_.end_of_msg) {
    done_ = true;
  } else if (id == m_.open || id == m_.close) {
    pending_ = std::string();
    pending_is_open_ = id == m_.open;
  } else if (id == m_.sep) {
    if (!pending_) return;
    std::string header = std::move(*pending_);
    pending_.reset();
    if (pending_is_open_) OpenElement(header);
    else CloseElement(header);
  } else if (pending_) {
    pending_->append(piece);
  } else {
    Emit(piece);
  }
}

void ReplyParser::KimiMarker(int id) {
  if (id == kimi_.section_begin || id == kimi_.call_begin) {
    FlushHeld();
    tag_state_ = TagState::kContent;
  }
  if (id == kimi_.section_begin) {
    in_calls_section_ = true;
  } else if (id == kimi_.call_begin) {
    if (kimi_phase_ == KimiPhase::kArguments) EndKimiCall();
    kimi_phase_ = KimiPhase::kId;
    kimi_text_.clear();
  } else if (id == kimi_.argument_begin) {
    if (kimi_phase_ != KimiPhase::kId) return;
    kimi_phase_ = KimiPhase::kArguments;
    ParsedCall call;
    call.id = Trim(kimi_text_);
    call.name = KimiCallName(call.id);
    if (call.id.empty()) call.id = NewCallId();
    call.index = static_cast<int>(calls_.size());
    kimi_text_.clear();
    if (max_calls_ >= 0 && calls_.size() >= static_cast<size_t>(max_calls_)) {
      kimi_phase_ = KimiPhase::kDropped;  // parallel_tool_calls false: later calls dropped
      return;
    }
    calls_.push_back(std::move(call));
    call_open_ = true;
  } else if (id == kimi_.call_end) {
    if (kimi_phase_ == KimiPhase::kArguments) EndKimiCall();
    kimi_phase_ = KimiPhase::kNone;
  } else if (id == kimi_.section_end) {
    if (kimi_phase_ == KimiPhase::kArguments) EndKimiCall();
    kimi_phase_ = KimiPhase::kNone;
    in_calls_section_ = false;
  }
}

void ReplyParser::EndKimiCall() {
  ParsedCall& call = calls_.back();
  call.json_block = Trim(kimi_text_);
  Json v;
  std::string err;
  if (ParseJson(*call.json_block, &v, &err) && v.is_object()) call.arguments = std::move(v);
  kimi_text_.clear();
  call_open_ = false;
}

// Text held as a possible think tag was not one after all: it goes where it
// would have been part of.
void ReplyParser::FlushHeld() {
  if (tag_state_ == TagState::kThinking) AppendReasoning(held_);
  else content_.append(held_);
  held_.clear();
}

// The reasoning starts at its first non-space character.
void ReplyParser::AppendReasoning(std::string_view text) {
  if (reasoning_.empty()) {
    while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  }
  reasoning_.append(text);
}

void ReplyParser::EmitTagged(std::string_view text) {
  switch (tag_state_) {
    case TagState::kContent:
      content_.append(text);
      return;
    case TagState::kAfterThinking: {
      size_t i = 0;
      while (i < text.size() && IsSpace(text[i])) ++i;
      if (i == text.size()) return;
      tag_state_ = TagState::kContent;
      content_.append(text.substr(i));
      return;
    }
    case TagState::kStart: {
      held_.append(text);
      size_t i = 0;
      while (i < held_.size() && IsSpace(held_[i])) ++i;
      const std::string_view rest = std::string_view(held_).substr(i);
      if (rest.size() >= think_open_.size() && rest.substr(0, think_open_.size()) == think_open_) {
        const std::string after(rest.substr(think_open_.size()));
        held_.clear();
        tag_state_ = TagState::kThinking;
        EmitTagged(after);
      } else if (rest.empty() || std::string_view(think_open_).substr(0, rest.size()) == rest) {
        // all whitespace, or the open tag's beginning: wait
      } else {
        tag_state_ = TagState::kContent;
        content_.append(held_);
        held_.clear();
      }
      return;
    }
    case TagState::kThinking: {
      held_.append(text);
      const size_t close = held_.find(think_close_);
      if (close != std::string::npos) {
        const std::string after = held_.substr(close + think_close_.size());
        held_.resize(close);
        AppendReasoning(held_);
        held_.clear();
        tag_state_ = TagState::kAfterThinking;
        EmitTagged(after);
        return;
      }
      // Keep the longest end that may begin the close tag.
      size_t keep = std::min(held_.size(), think_close_.size() - 1);
      while (keep > 0 && held_.compare(held_.size() - keep, keep, think_close_, 0, keep) != 0) --keep;
      AppendReasoning(std::string_view(held_).substr(0, held_.size() - keep));
      held_.erase(0, held_.size() - keep);
      return;
    }
  }
}

void ReplyParser::Emit(std::string_view text) {
  if (json_active_) {
    json_text_.append(text);
  } else if (!arg_key_.empty()) {
    arg_text_.append(text);
  } else if (!stack_.empty() && stack_.back() == "think") {
    reasoning_.append(text);
  } else if (!stack_.empty() && (stack_.back() == "tools" || stack_.back() == "call")) {
    // text between tool elements is dropped
  } else {
    content_.append(text);
  }
}

void ReplyParser::OpenElement(const std::string& raw) {
  Header h = ParseHeader(raw);
  if (h.name == "call") {
    ParsedCall call;
    const std::string* tool = h.Get("tool");
    call.name = tool ? *tool : "";
    int index = 0;
    const std::string* idx = h.Get("index");
    if (!idx || !ParseIndex(*idx, &index)) index = static_cast<int>(calls_.size()) + 1;
    call.index = index;
    const std::string* id = h.Get("id");
    call.id = id && !id->empty() ? *id : NewCallId();
    calls_.push_back(std::move(call));
    call_open_ = true;
  } else if (h.name == "argument") {
    const std::string* key = h.Get("key");
    const std::string* type = h.Get("type");
    arg_key_ = key ? *key : "";
    arg_type_ = type ? *type : "";
    arg_text_.clear();
  } else if (h.name == "json") {
    json_active_ = true;
    json_text_.clear();
  }
  stack_.push_back(h.name);
}

void ReplyParser::CloseArgument() {
  if (!arg_key_.empty() && !calls_.empty()) {
    calls_.back().arguments[arg_key_] = Typed(arg_text_, arg_type_);
  }
  arg_key_.clear();
  arg_type_.clear();
  arg_text_.clear();
}

void ReplyParser::CloseJson() {
  if (!calls_.empty()) calls_.back().json_block = json_text_;
  json_active_ = false;
  json_text_.clear();
}

void ReplyParser::CloseElement(const std::string& raw) {
  std::string name = ParseHeader(raw).name;
  if (name == "argument") CloseArgument();
  else if (name == "json") CloseJson();
  else if (name == "call" || name == "tools") call_open_ = false;
  auto it = std::find(stack_.rbegin(), stack_.rend(), name);
  if (it != stack_.rend()) {
    stack_.erase(std::prev(it.base()), stack_.end());
  } else if (name.empty() && !stack_.empty()) {
    stack_.pop_back();
  }
}

void ReplyParser::Finish() {
  if (!xtml_) {
    FlushHeld();
    if (kimi_phase_ == KimiPhase::kArguments) {
      EndKimiCall();
      if (!done_) calls_.back().cut = true;  // max_tokens inside the call
    }
    return;
  }
  if (pending_) {
    // A header cut by the end of generation is text; one cut by the end
    // marker is discarded (the model closed the message on purpose).
    std::string header = std::move(*pending_);
    pending_.reset();
    if (!done_) Emit((pending_is_open_ ? "<|open|>" : "<|close|>") + header);
  }
  if (json_active_) CloseJson();
  if (!arg_key_.empty()) CloseArgument();
  if (call_open_ && !done_ && !calls_.empty()) calls_.back().cut = true;
}

}  // namespace waste::server
