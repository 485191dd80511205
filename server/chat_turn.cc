#include "chat_turn.h"

#include <algorithm>

namespace waste::server {
namespace {

// Expected length of a sequence starting with `b`, 0 for an invalid lead.
int SequenceLength(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return 2;
  if (b >= 0xe0 && b <= 0xef) return 3;
  if (b >= 0xf0 && b <= 0xf4) return 4;
  return 0;
}

// Whether s[i..i+n) is a complete valid sequence (n from SequenceLength),
// or, when `partial`, a valid prefix cut by the end of s.
bool ValidSequence(std::string_view s, size_t i, int n, bool* partial) {
  *partial = false;
  auto b0 = static_cast<unsigned char>(s[i]);
  for (int k = 1; k < n; ++k) {
    if (i + static_cast<size_t>(k) >= s.size()) {
      *partial = true;
      return true;
    }
    auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    unsigned char lo = 0x80, hi = 0xbf;
    if (k == 1) {
      if (b0 == 0xe0) lo = 0xa0;
      if (b0 == 0xed) hi = 0x9f;
      if (b0 == 0xf0) lo = 0x90;
      if (b0 == 0xf4) hi = 0x8f;
    }
    if (b < lo || b > hi) return false;
  }
  return true;
}

}  // namespace

size_t CompleteUtf8Prefix(std::string_view s) {
  // Only the last 3 bytes can be an unfinished character.
  size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    int n = SequenceLength(static_cast<unsigned char>(s[i]));
    if (n <= 1) continue;
    bool partial = false;
    if (ValidSequence(s, i, n, &partial) && partial) return i;
  }
  return s.size();
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int n = SequenceLength(static_cast<unsigned char>(s[i]));
    bool partial = false;
    if (n == 1) {
      out.push_back(s[i++]);
    } else if (n > 1 && ValidSequence(s, i, n, &partial) && !partial) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

ChatTurn::ChatTurn(ReplyParser parser, std::vector<std::string> stops, int eos_id)
    : parser_(std::move(parser)), stops_(std::move(stops)), eos_id_(eos_id) {}

void ChatTurn::Send(Json delta, std::vector<Json>* deltas) {
  if (!role_sent_) {
    deltas->push_back({{"role", "assistant"}, {"content", ""}});
    role_sent_ = true;
  }
  deltas->push_back(std::move(delta));
}

// Sends the reasoning and content that can no longer change: whole
// characters only, and no content that may still begin a stop string.
void ChatTurn::Release(bool all, std::vector<Json>* deltas) {
  const std::string& r = parser_.reasoning();
  size_t r_end = all ? r.size() : CompleteUtf8Prefix(r);
  if (r_end > sent_reasoning_) {
    Send({{"reasoning_content",
           SanitizeUtf8(std::string_view(r).substr(sent_reasoning_, r_end - sent_reasoning_))}},
         deltas);
    sent_reasoning_ = r_end;
  }
  const std::string& c = parser_.content();
  size_t c_end = c.size();
  if (!all) {
    size_t hold = 0;
    for (const std::string& stop : stops_) {
      for (size_t k = std::min(stop.size() - 1, c.size()); k > hold; --k) {
        if (c.compare(c.size() - k, k, stop, 0, k) == 0) {
          hold = k;
          break;
        }
      }
    }
    c_end = CompleteUtf8Prefix(std::string_view(c).substr(0, c.size() - hold));
  }
  if (c_end > sent_content_) {
    Send({{"content",
           SanitizeUtf8(std::string_view(c).substr(sent_content_, c_end - sent_content_))}},
         deltas);
    sent_content_ = c_end;
  }
}

bool ChatTurn::OnToken(int id, std::string_view piece, std::vector<Json>* deltas) {
  if (stopped_ || parser_.done()) return false;
  ++tokens_;
  const size_t reasoning_before = parser_.reasoning().size();
  const size_t content_before = parser_.content().size();
  parser_.Push(id, id == eos_id_ ? std::string_view() : piece);
  if (parser_.reasoning().size() > reasoning_before) ++reasoning_tokens_;
  std::string& c = parser_.content();
  if (!stops_.empty() && c.size() > stop_checked_) {
    size_t longest = 0;
    for (const std::string& s : stops_) longest = std::max(longest, s.size());
    size_t from = stop_checked_ >= longest ? stop_checked_ - longest + 1 : 0;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) {
      const size_t at = c.find(s, from);
      if (at < cut) {
        cut = at;
        matched_stop_ = s;
      }
    }
    if (cut != std::string::npos) {
      c.resize(cut);
      stopped_ = true;
    }
    stop_checked_ = c.size();
  }
  last_in_content_ = c.size() > content_before;
  Release(parser_.done() || stopped_, deltas);
  const auto& calls = parser_.calls();
  announced_.resize(calls.size(), false);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (announced_[i] || calls[i].name.empty()) continue;
    Send({{"tool_calls",
           Json::array({{{"index", i},
                         {"id", calls[i].id},
                         {"type", "function"},
                         {"function", {{"name", calls[i].name}, {"arguments", ""}}}}})}},
         deltas);
    announced_[i] = true;
  }
  return !(stopped_ || parser_.done());
}

void ChatTurn::Finish(std::vector<Json>* deltas) {
  size_t cut = parser_.content().size();
  parser_.Finish();
  if (stopped_) parser_.content().resize(cut);
  Release(true, deltas);
  const auto& calls = parser_.calls();
  announced_.resize(calls.size(), false);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!announced_[i]) {
      Send({{"tool_calls",
             Json::array({{{"index", i},
                           {"id", calls[i].id},
                           {"type", "function"},
                           {"function", {{"name", calls[i].name}, {"arguments", ""}}}}})}},
           deltas);
      announced_[i] = true;
    }
    Send({{"tool_calls",
           Json::array({{{"index", i},
                         {"function", {{"arguments", SanitizeUtf8(calls[i].ArgumentsString())}}}}})}},
         deltas);
  }
  if (!role_sent_) {
    deltas->push_back({{"role", "assistant"}, {"content", ""}});
    role_sent_ = true;
  }
}

Json ChatTurn::Message() const {
  Json m = {{"role", "assistant"}};
  std::string content = SanitizeUtf8(const_cast<ReplyParser&>(parser_).content());
  m["content"] = content.empty() ? Json(nullptr) : Json(content);
  if (!parser_.reasoning().empty()) m["reasoning_content"] = SanitizeUtf8(parser_.reasoning());
  if (!parser_.calls().empty()) {
    Json calls = Json::array();
    for (const ParsedCall& c : parser_.calls()) {
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", SanitizeUtf8(c.name)},
                                     {"arguments", SanitizeUtf8(c.ArgumentsString())}}}});
    }
    m["tool_calls"] = calls;
  }
  return m;
}

std::string ChatTurn::FinishReason(bool ran_to_max) const {
  // Cut by max_tokens is "length" even inside a tool call (as OpenAI): the
  // call is not complete, so it must not be reported as "tool_calls".
  if (ran_to_max && !stopped_ && !parser_.done()) return "length";
  if (!parser_.calls().empty()) return "tool_calls";
  return "stop";
}

}  // namespace waste::server
