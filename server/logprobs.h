// The `logprobs` objects of OpenAI replies (docs/SERVER.md, "Log
// probabilities"), from the engine's per-token log-probabilities
// (TokenEvent, GenParams::prompt_scores): a chat choice's
// {"content": [...], "refusal": null} and a text completion's
// {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "json_text.h"
#include "waste/waste.h"

namespace waste::server {

// One entry of a chat choice's logprobs.content: {"token", "logprob",
// "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...]}. `token`
// is the piece as valid UTF-8 (a byte that does not complete a character
// becomes U+FFFD); `bytes` are its raw bytes.
Json ChatLogprobEntry(const Engine& engine, int token, std::string_view piece, double logprob,
                      std::span<const TokenLogprob> top);
// A chat choice's `logprobs` holding `content` (an array of entries).
Json ChatLogprobs(Json content);

// A text completion's logprobs, built token by token in text order. A
// token is spelled as its text, or as "bytes:\xNN..." when its piece is not
// valid UTF-8 on its own (OpenAI's spelling), in `tokens` and as map keys.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(const Engine& engine) : engine_(engine) {}
  // A token of the choice's text. `logprob` is empty for the echoed
  // prompt's first token (nothing before it scores it; null in the reply).
  // The top_logprobs map holds `top` and the token itself (as OpenAI's).
  void Add(int token, std::string_view piece, std::optional<double> logprob,
           std::span<const TokenLogprob> top);
  bool empty() const { return tokens_.empty(); }
  // The object of the entries added since the last Take (a stream's
  // chunk), or of all (a blocking reply); they are then cleared. Text
  // offsets keep counting across Takes, from the start of the choice's text.
  Json Take();

 private:
  const Engine& engine_;
  Json tokens_ = Json::array(), token_logprobs_ = Json::array(), top_logprobs_ = Json::array(),
       text_offset_ = Json::array();
  // The text so far: its characters up to the last whole one (invalid
  // bytes count as the U+FFFD each becomes), and the bytes after it that
  // may still complete a character.
  int64_t done_chars_ = 0;
  std::string tail_;
};

}  // namespace waste::server
