// Chat templates and prompt assembly (ENGINE.md §1.5, FORMAT.md §9.3), for
// hosts that build prompts the way the `waste` CLI does.
//
// chat.json gives [prefix, suffix] pairs for the system, user and assistant
// turns and the "open" string that hands the turn to the assistant. A prompt
// is a list of segments, each tokenized on its own in its own mode — markup
// for template structure and media blocks, plain for anything a person
// wrote — and never concatenated before tokenizing, so user text cannot
// forge a control token. Model::TokenizeSegments turns a segment list into
// ids. See docs/TOKENIZER.md. (How the `waste` commands assemble their
// prompts from these is the CLI's business: cli/prompt_plan.h.)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "waste/export.h"
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
  // Markup once before a conversation's first turn (DeepSeek's
  // <｜begin▁of▁sentence｜>); chat.json "begin".
  std::string begin;
  // The tags a reasoning model (DeepSeek-R1, Kimi-K2-Thinking) writes its
  // thinking between at the start of a reply, e.g. "<think>", "</think>";
  // chat.json "think": [open, close]. Empty: the format has none. Hosts
  // show such text as reasoning and drop it from earlier turns.
  std::string think_open;
  std::string think_close;
  // The built-in format's name ("kimi", "deepseek"); empty when read from
  // a chat.json.
  std::string stock_name;

  // Parses chat.json as real JSON: an object whose optional "system",
  // "user" and "assistant" are [prefix, suffix] string pairs, whose
  // optional "open" and "begin" are strings and optional "think" an
  // [open, close] pair; other keys are ignored; no length caps.
  // kFormat (the message names `name` and the field) otherwise.
  WASTE_EXPORT static Result<ChatTemplate> Parse(std::string_view json, std::string_view name) noexcept;
  // <dir>/chat.json; nullopt when the container has none; kIo when it
  // exists but cannot be read; kFormat when it is malformed.
  WASTE_EXPORT static Result<std::optional<ChatTemplate>> Load(const std::string& container_dir) noexcept;

  // The built-in format for a container without chat.json, chosen by the
  // tokenizer: the first whose every marker `is_special` says is one
  // special token. "kimi" (<|im_user|>user<|im_middle|>…<|im_end|>:
  // Kimi-Linear, Kimi-K2, Kimi-K2-Thinking), "deepseek" (<｜User｜>…
  // <｜Assistant｜>…<｜end▁of▁sentence｜>: DeepSeek-V3, DeepSeek-R1). Both
  // know the <think> tags. nullopt when none fits (or memory ran out).
  WASTE_EXPORT static std::optional<ChatTemplate> Stock(
      const std::function<bool(std::string_view)>& is_special) noexcept;
  // chat.json when the container has one, else Stock(is_special); errors
  // as Load's.
  WASTE_EXPORT static Result<std::optional<ChatTemplate>> ForContainer(
      const std::string& container_dir, const std::function<bool(std::string_view)>& is_special) noexcept;
  // Where the template comes from, for banners: "DIR/chat.json" or
  // "the built-in kimi format".
  WASTE_EXPORT std::string Source(const std::string& container_dir) const;

  // The template applies only with a user prefix, an assistant prefix or
  // an open string.
  bool usable() const noexcept {
    return !user_prefix.empty() || !assistant_prefix.empty() || !open.empty();
  }

  // Where a reply ends: the assistant suffix, and the start of a user or
  // system turn (a model that writes one has ended its reply and begun
  // inventing the next message; a repeat of its own header before the
  // answer, which weak models write, is not an end). Whole prefixes (a
  // reply may hold the control token a header starts with: K3 writes
  // <|open|>think<|sep|> inside its own turn). No duplicates, none
  // empty. Hosts pass them as stop strings and hide them. Empty only if
  // memory ran out.
  WASTE_EXPORT std::vector<std::string> ReplyStops() const noexcept;
};

enum class SegmentMode { kMarkup, kPlain };

struct PromptSegment {
  SegmentMode mode = SegmentMode::kPlain;
  std::string text;
  bool operator==(const PromptSegment&) const = default;
};

// The markup block one image contributes before the text; the size is
// omitted when unknown (width or height <= 0).
WASTE_EXPORT std::string MediaBlock(int width, int height) noexcept;

}  // namespace waste
