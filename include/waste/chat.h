// Chat templates and prompt assembly (ENGINE.md §1.5, FORMAT.md §9.3), for
// hosts that build prompts the way the `waste` CLI does.
//
// chat.json gives [prefix, suffix] pairs for the system, user and assistant
// turns and the "open" string that hands the turn to the assistant. A prompt
// is a list of segments, each tokenized on its own in its own mode — markup
// for template structure and media blocks, plain for anything a person
// wrote — and never concatenated before tokenizing, so user text cannot
// forge a control token. Engine::TokenizeSegments turns a segment list into
// ids. See docs/TOKENIZER.md.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "waste/status.h"

namespace waste {

struct ChatTemplate {
  std::string system_prefix;
  std::string system_suffix;
  std::string user_prefix;
  std::string user_suffix;
  std::string assistant_prefix;
  std::string assistant_suffix;
  std::string open;

  // Parses chat.json as real JSON: an object whose optional "system",
  // "user" and "assistant" are [prefix, suffix] string pairs and whose
  // optional "open" is a string; other keys are ignored; no length caps.
  // kFormat (the message names `name` and the field) otherwise.
  static Result<ChatTemplate> Parse(std::string_view json, std::string_view name) noexcept;
  // <dir>/chat.json; nullopt when the container has none; kIo when it
  // exists but cannot be read; kFormat when it is malformed.
  static Result<std::optional<ChatTemplate>> Load(const std::string& container_dir) noexcept;

  // The template applies only with a user prefix, an assistant prefix or
  // an open string.
  bool usable() const noexcept {
    return !user_prefix.empty() || !assistant_prefix.empty() || !open.empty();
  }
};

enum class SegmentMode { kMarkup, kPlain };

struct PromptSegment {
  SegmentMode mode = SegmentMode::kPlain;
  std::string text;
  bool operator==(const PromptSegment&) const = default;
};

// What a command feeds the model for one turn, and how to present it.
struct PromptPlan {
  std::vector<PromptSegment> segments;
  // Untemplated prompts are echoed to stdout before the continuation.
  bool echo_prompt = false;
  // The stop string to use when --stop was not given: the assistant suffix
  // of a template in use, else empty (none).
  std::string default_stop;
};

// Empty segments are never produced. `media_blocks` are MediaBlock() texts.

// `run`. Templated unless `tmpl` is null or unusable or `raw`: then the
// media blocks and the prompt are all markup (the user may write control
// tokens on purpose). `system` is used only when templated and non-empty.
PromptPlan BuildRunPrompt(const ChatTemplate* tmpl, bool raw, std::string_view system,
                          std::span<const std::string> media_blocks,
                          std::string_view prompt) noexcept;

// `chat`: the system turn evaluated once at start; empty without a usable
// template or without system text.
std::vector<PromptSegment> BuildChatSystemTurn(const ChatTemplate* tmpl,
                                               std::string_view system) noexcept;

// `chat`: one typed line. Templated, the turn ends with "open" (or the
// assistant prefix when open is empty); untemplated, the line is markup and
// echoed.
PromptPlan BuildChatTurn(const ChatTemplate* tmpl, std::span<const std::string> media_blocks,
                         std::string_view line) noexcept;

// `eval`: always the untemplated markup form.
std::vector<PromptSegment> BuildEvalPrompt(std::string_view prompt) noexcept;

// The markup block one image contributes before the text; the size is
// omitted when unknown (width or height <= 0).
std::string MediaBlock(int width, int height) noexcept;

}  // namespace waste
