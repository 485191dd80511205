// How each command of the `waste` CLI turns its input into prompt segments
// (ENGINE.md §1.5). Moved here from the public waste/chat.h: these are the
// CLI's choices (echo, default stop, when to template), not library API.
// Chat templates, segments and segment tokenization stay public.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "waste/chat.h"

namespace waste {

// What a command feeds the model for one turn, and how to present it.
struct PromptPlan {
  std::vector<PromptSegment> segments;
  // Untemplated prompts are echoed to stdout before the continuation.
  bool echo_prompt = false;
  // The stop strings to use when --stop was not given: a template's
  // ReplyStops() (its assistant suffix and the start of any turn), else none.
  std::vector<std::string> default_stops;
};

// Empty segments are never produced. `media_blocks` are MediaBlock() texts.

// `run`. Templated unless `tmpl` is null or unusable or `raw`: then the
// media blocks and the prompt are all markup (the user may write control
// tokens on purpose). Templated: the opening (BuildChatSystemTurn), the
// user turn, the hand-over.
PromptPlan BuildRunPrompt(const ChatTemplate* tmpl, bool raw, std::string_view system,
                          std::span<const std::string> media_blocks, std::string_view prompt);

// `chat`: what a conversation opens with, evaluated once at start: the
// template's `begin` (DeepSeek's BOS) and the system turn; empty without a
// usable template, and the system turn left out without system text.
std::vector<PromptSegment> BuildChatSystemTurn(const ChatTemplate* tmpl, std::string_view system);

// `chat`: one typed line. Templated, the turn ends with "open" (or the
// assistant prefix when open is empty); untemplated, the line is markup and
// echoed.
PromptPlan BuildChatTurn(const ChatTemplate* tmpl, std::span<const std::string> media_blocks,
                         std::string_view line);

// `eval`: always the untemplated markup form.
std::vector<PromptSegment> BuildEvalPrompt(std::string_view prompt);

}  // namespace waste
