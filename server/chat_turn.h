// One assistant reply as it is generated: feeds the reply parser, applies
// stop strings to the content, holds back bytes that may still become a
// whole UTF-8 character or a stop string, and produces the streamed deltas
// and the final message. Shared by the blocking and streaming paths, so the
// concatenated deltas always equal the blocking message.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "json_text.h"
#include "reply_parser.h"

namespace waste::server {

class ChatTurn {
 public:
  // `eos_id`: the container's end-of-sequence id; its piece is dropped when
  // it is not a marker of the chat format (-1: none).
  ChatTurn(ReplyParser parser, std::vector<std::string> stops, int eos_id);

  // One delivered token. Appends the OpenAI `delta` objects to send now.
  // Returns false when generation must stop (end marker or stop string).
  bool OnToken(int id, std::string_view piece, std::vector<Json>* deltas);

  // End of generation: remaining text, the role delta if none was sent,
  // then each tool call's announcement (if still due) and its arguments.
  void Finish(std::vector<Json>* deltas);

  // After Finish. `ran_to_max`: the engine delivered max_tokens and was
  // not stopped.
  Json Message() const;
  std::string FinishReason(bool ran_to_max) const;
  int completion_tokens() const { return tokens_; }
  // Tokens whose text went to the reasoning (the think channel's text; its
  // markers are not counted): usage's reasoning_tokens.
  int reasoning_tokens() const { return reasoning_tokens_; }
  // Whether the last token's text went into the content (the message's
  // text): not reasoning, markers or tool calls, and not wholly cut by a
  // stop string. Text the parser held back (a possible marker) counts for
  // the token that released it.
  bool last_token_in_content() const { return last_in_content_; }
  // The stop string that ended the reply, or empty (Anthropic's
  // stop_sequence).
  const std::string& matched_stop() const { return matched_stop_; }

 private:
  void Send(Json delta, std::vector<Json>* deltas);
  void Release(bool all, std::vector<Json>* deltas);

  ReplyParser parser_;
  std::vector<std::string> stops_;
  int eos_id_;
  int tokens_ = 0;
  int reasoning_tokens_ = 0;
  bool last_in_content_ = false;
  std::string matched_stop_;
  bool stopped_ = false;
  size_t stop_checked_ = 0;    // content bytes already searched for stops
  size_t sent_reasoning_ = 0, sent_content_ = 0;
  bool role_sent_ = false;
  std::vector<bool> announced_;
};

// UTF-8 helpers: the length of the longest prefix of `s` that does not end
// inside a character that may still complete, and `s` with every invalid
// byte replaced by U+FFFD.
size_t CompleteUtf8Prefix(std::string_view s);
std::string SanitizeUtf8(std::string_view s);

}  // namespace waste::server
