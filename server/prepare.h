// From a validated-JSON request body to what the engine needs: the chat
// format resolved at startup, the rendered and tokenized prompt, the
// context check and the sampling parameters. Everything here happens
// before a request waits for the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api_error.h"
#include "chat_request.h"
#include "image_input.h"
#include "json_text.h"
#include "render.h"
#include "reply_parser.h"
#include "waste/grammar.h"
#include "waste/waste.h"

namespace waste::server {

struct ChatFormat {
  enum class Kind { kNone, kXtml, kChatJson } kind = Kind::kNone;
  XtmlMarkers markers;
  ChatTemplate tmpl;
  int stop_id = -1;
  bool default_thinking = true;
  // The think channel's cap for requests that name none (serve
  // --reasoning-budget; -1: none), and the tokens that close the channel
  // and open the response (XTML; what the cap forces, thinking_budget.h;
  // think tags are capped by waste::ThinkTagBudget, waste/grammar.h).
  int default_thinking_budget = -1;
  std::vector<int> think_close_ids;
  // chat.json / built-in Kimi turns whose tokenizer has Kimi's tool-call
  // markers: tools are declared, rendered and parsed (render.h).
  KimiToolMarkers kimi_tools;
  std::string none_reason;  // why neither format applies
  // The token trie constrained replies are matched against (XTML only;
  // markers and end-of-sequence never match as text).
  std::shared_ptr<const Vocabulary> vocab;
  // Images in requests (XTML only): --vision on a model with a tower.
  VisionOptions vision;
  std::string Name() const;
};

// XTML when the four markers are single tokens, else the engine's chat
// template (Engine::FindChatTemplate: the container's chat.json, else a
// built-in format its tokenizer fits).
ChatFormat ResolveChatFormat(const Engine& engine, bool no_thinking);

struct ServeLimits {
  uint32_t ctx_max = 0;                  // the model's context
  uint64_t default_max_tokens = 4096;
};

struct PreparedChat {
  RenderedPrompt prompt;
  std::vector<int> ids;
  GenParams params;
  std::vector<std::string> stops;
  bool stream = false;
  bool include_usage = false;
  // response_format json_object / json_schema: the reply grammar.
  std::shared_ptr<const Grammar> grammar;
  // Tokens after which `grammar` applies (empty: from the first token).
  std::vector<int> grammar_triggers;
  // The think channel's cap in tokens (the request's or the server's; -1:
  // none, or no think channel to cap).
  int thinking_budget = -1;
  // The request's images in prompt order; `ids` holds one media pad per
  // image until the engine thread encodes them and expands the pads.
  std::vector<ImageInput> images;
  int prompt_tokens = 0;  // after pad expansion (what usage reports)
  LogprobsRequest logprobs;  // also set in params (logprobs, top_logprobs)
  int choices = 1;           // `n`: replies generated in turn from the one prompt
  // `prediction` tokenized (GenParams::draft_prediction; at most the
  // context, as no reply is longer): what drafting quotes first.
  std::vector<int> prediction;
  // The Messages API's stop_sequence: each choice (and a stream's finish
  // chunk) says which stop string ended it, as "stop_string" (not an
  // OpenAI field, so only when asked).
  bool report_stop_string = false;
  // The request as rendered, for the follow-on prefill's guess
  // (follow_on.h); null when the conversation has images (no restore point
  // lies past the first one).
  std::shared_ptr<const Json> body;
};

std::optional<ApiError> PrepareChat(const Json& body, const ChatFormat& format,
                                    const Engine& engine, const ServeLimits& limits,
                                    PreparedChat* out);

// One prompt of a completions request.
struct CompletionPrompt {
  std::vector<int> ids;
  // With echo the choice's text starts with this: the prompt as sent, or
  // its ids decoded.
  std::string echo_text;
  int max_tokens = 0;  // the request's cap, within this prompt's room in the context
};

// OpenAI's `prompt` may list several prompts (strings, or arrays of ids):
// each gets its `n` choices, prompt by prompt (choice index = prompt × n + j).
inline constexpr size_t kMaxPrompts = 128;

struct PreparedCompletion {
  std::vector<CompletionPrompt> prompts;  // at least one
  GenParams params;                       // max_tokens: each prompt's own
  std::vector<std::string> stops;
  bool stream = false;
  bool include_usage = false;
  // `logprobs` and `echo` (chat_request.h). With echo and logprobs each
  // prompt is scored, and `score_only` (max_tokens 0) generates nothing
  // after it.
  LogprobsRequest logprobs;
  bool score_only = false;
  int choices = 1;  // `n`: the completions returned per prompt
  int best_of = 1;  // generated per prompt (>= choices): the `choices` best are returned
};

std::optional<ApiError> PrepareCompletion(const Json& body, const ChatFormat& format,
                                          const Engine& engine, const ServeLimits& limits,
                                          PreparedCompletion* out);

}  // namespace waste::server
