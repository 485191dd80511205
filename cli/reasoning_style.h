// A reasoning model's thinking, shown apart on a terminal: when a reply
// opens with the chat format's think tag (DeepSeek-R1, Kimi-K2-Thinking:
// `<think>` ... `</think>`), `waste run` and `waste chat` print what lies
// between the tags faint and the tags themselves not at all; the answer
// after them prints as usual. Off a terminal the model's text goes out as
// it is (a script reading stdout gets exactly the reply). The tags may be
// cut anywhere across pieces; whitespace before the opening tag is kept.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "waste/chat.h"

namespace waste::cli {

class ReasoningStyle {
 public:
  // text(bytes): the model's text, to print as the caller prints text;
  // faint(on): the caller's own style switch (an SGR sequence), never
  // mixed with the model's bytes.
  using TextSink = std::function<void(std::string_view)>;
  using FaintSink = std::function<void(bool on)>;
  // Empty `open` or `close`: everything passes through unchanged.
  ReasoningStyle(std::string open, std::string close, TextSink text, FaintSink faint);

  void Push(std::string_view bytes);
  // End of the reply: held bytes out, the faint style off if still on.
  void Finish();

 private:
  enum class State { kStart, kThinking, kAnswer };
  // Emits `held_` up to where `tag` could still begin at its end; true and
  // consumes through the tag when it is there whole.
  bool TakeTag(const std::string& tag);

  std::string open_, close_;
  TextSink text_;
  FaintSink faint_;
  State state_ = State::kStart;
  std::string held_;
};

// What `waste run` and `waste chat` use: the format's think tags styled
// faint (SGR 2, back with SGR 22, written through `codes`) when stdout is
// a `terminal`, the format has think tags and NO_COLOR is unset
// (no-color.org); otherwise everything passes through to `text`.
ReasoningStyle TerminalReasoningStyle(const ChatTemplate* tmpl, bool terminal,
                                      ReasoningStyle::TextSink text,
                                      ReasoningStyle::TextSink codes);

}  // namespace waste::cli
