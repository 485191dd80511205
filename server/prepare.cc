#include "prepare.h"

#include <algorithm>
#include <limits>
#include <random>

#include "chat_request.h"
#include "constraint.h"

namespace waste::server {
namespace {

int SingleId(const Engine& engine, const std::string& text) {
  auto ids = engine.Tokenize(text, /*markup=*/true, /*add_bos=*/false);
  if (!ids || ids->size() != 1) return -1;
  return (*ids)[0];
}

// A seed for a sampled request that names none: random per request, as
// `waste run` picks one (cli/generation.cc), never 0 (the engine's fixed
// default). A seed the request names is used as given and repeats exactly.
uint64_t RandomSeed() {
  static thread_local std::mt19937_64 rng{(uint64_t{std::random_device{}()} << 32) ^
                                          std::random_device{}()};
  uint64_t seed = rng();
  return seed != 0 ? seed : 1;
}

// The request's token cap (or the server's default) within the room a
// prompt of `prompt_tokens` leaves in the context.
int MaxTokensFor(const SamplingRequest& s, const ServeLimits& limits, size_t prompt_tokens) {
  uint64_t cap = s.max_tokens.value_or(limits.default_max_tokens);
  uint64_t room = limits.ctx_max > prompt_tokens ? limits.ctx_max - prompt_tokens : 0;
  if (limits.ctx_max > 0) cap = std::min<uint64_t>(cap, std::max<uint64_t>(1, room));
  return static_cast<int>(std::min<uint64_t>(cap, 0x7fffffff));
}

void FillParams(const SamplingRequest& s, const ServeLimits& limits, size_t prompt_tokens,
                GenParams* p) {
  p->temperature = s.temperature;
  if (s.top_p) p->top_p = *s.top_p;
  if (s.top_k) p->top_k = *s.top_k;
  if (s.seed) p->seed = *s.seed;
  else if (s.temperature > 0) p->seed = RandomSeed();
  p->max_tokens = MaxTokensFor(s, limits, prompt_tokens);
  p->presence_penalty = s.presence_penalty;
  p->frequency_penalty = s.frequency_penalty;
  p->logit_bias = s.logit_bias;
}

std::optional<ApiError> CheckLogitBias(const SamplingRequest& s, const Engine& engine) {
  for (const auto& [id, bias] : s.logit_bias) {
    if (id >= engine.info().vocab) {
      return BadRequest("logit_bias: token " + std::to_string(id) +
                            " is not below the vocabulary size " +
                            std::to_string(engine.info().vocab),
                        "logit_bias");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ContextCheck(size_t n, const ServeLimits& limits) {
  if (limits.ctx_max > 0 && n >= limits.ctx_max) {
    return BadRequest("prompt is " + std::to_string(n) + " tokens, and this model's context is " +
                          std::to_string(limits.ctx_max),
                      "messages", "context_length_exceeded");
  }
  return std::nullopt;
}

ApiError EngineError(const std::string& what, const Status& st) {
  return ApiError{500, "engine_error", what + ": " + st.ToString(), std::nullopt, std::nullopt};
}

}  // namespace

std::string ChatFormat::Name() const {
  switch (kind) {
    case Kind::kXtml: return "xtml";
    case Kind::kChatJson: return tmpl.stock_name.empty() ? "chat.json" : tmpl.stock_name;
    default: return "none";
  }
}

ChatFormat ResolveChatFormat(const Engine& engine, bool no_thinking) {
  ChatFormat f;
  f.markers = {SingleId(engine, "<|end_of_msg|>"), SingleId(engine, "<|open|>"),
               SingleId(engine, "<|close|>"), SingleId(engine, "<|sep|>")};
  if (f.markers.end_of_msg >= 0 && f.markers.open >= 0 && f.markers.close >= 0 &&
      f.markers.sep >= 0) {
    f.kind = ChatFormat::Kind::kXtml;
    f.stop_id = f.markers.end_of_msg;
    f.default_thinking = !no_thinking;
    std::vector<int> opaque = {f.markers.end_of_msg, f.markers.open, f.markers.close, f.markers.sep};
    if (engine.info().eos_id >= 0) opaque.push_back(engine.info().eos_id);
    f.vocab = Vocabulary::FromEngine(engine, opaque);
    std::vector<PromptSegment> close = {{SegmentMode::kMarkup, "<|close|>"},
                                        {SegmentMode::kPlain, "think"},
                                        {SegmentMode::kMarkup, "<|sep|>"},
                                        {SegmentMode::kMarkup, "<|open|>"},
                                        {SegmentMode::kPlain, "response"},
                                        {SegmentMode::kMarkup, "<|sep|>"}};
    if (auto ids = engine.TokenizeSegments(close, /*add_bos=*/false)) f.think_close_ids = *ids;
    return f;
  }
  std::string xtml_why = "the tokenizer lacks the XTML markers (<|open|> <|close|> <|sep|> <|end_of_msg|>)";
  // chat.json, else a built-in format the tokenizer's markers fit (the
  // DeepSeek-V3 / Kimi-K2 family's containers have no chat.json).
  auto loaded = engine.FindChatTemplate();
  if (!loaded) {
    f.none_reason = xtml_why + ", and chat.json is unreadable: " + loaded.error().message();
    return f;
  }
  if (!loaded->has_value() || !(*loaded)->usable()) {
    f.none_reason = xtml_why + ", the container has no usable chat.json, and its tokenizer "
                    "lacks the markers of the built-in kimi and deepseek formats";
    return f;
  }
  f.tmpl = **loaded;
  std::string stop = ChatJsonStopMarker(f.tmpl);
  f.stop_id = stop.empty() ? -1 : SingleId(engine, stop);
  if (f.stop_id < 0) {
    f.none_reason = xtml_why + ", and chat.json's assistant suffix has no single-token stop marker";
    return f;
  }
  f.kind = ChatFormat::Kind::kChatJson;
  f.default_thinking = false;
  if (f.tmpl.user_prefix == "<|im_user|>user<|im_middle|>" &&
      f.tmpl.system_prefix == "<|im_system|>system<|im_middle|>") {
    f.kimi_tools = {SingleId(engine, "<|tool_calls_section_begin|>"),
                    SingleId(engine, "<|tool_calls_section_end|>"),
                    SingleId(engine, "<|tool_call_begin|>"),
                    SingleId(engine, "<|tool_call_argument_begin|>"),
                    SingleId(engine, "<|tool_call_end|>")};
  }
  if (f.kimi_tools.ok()) {
    // The calls' grammar (constraint.cc) matches text against this trie;
    // the markers never match as text (not even inside a JSON string).
    const KimiToolMarkers& k = f.kimi_tools;
    std::vector<int> opaque = {f.stop_id, k.section_begin, k.section_end, k.call_begin,
                               k.argument_begin, k.call_end};
    for (const char* marker : {"<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>"}) {
      if (int id = SingleId(engine, marker); id >= 0) opaque.push_back(id);
    }
    if (engine.info().eos_id >= 0) opaque.push_back(engine.info().eos_id);
    f.vocab = Vocabulary::FromEngine(engine, opaque);
  }
  return f;
}

std::optional<ApiError> PrepareChat(const Json& body, const ChatFormat& format,
                                    const Engine& engine, const ServeLimits& limits,
                                    PreparedChat* out) {
  if (format.kind == ChatFormat::Kind::kNone) {
    return BadRequest("this container has no chat format: " + format.none_reason +
                          "; use /v1/completions",
                      "model", "unsupported_chat_format");
  }
  if (auto e = ParseStream(body, &out->stream, &out->include_usage)) return e;
  if (format.kind == ChatFormat::Kind::kXtml && format.vision.enabled) {
    // Shapes first, then the images (their errors name the part), then the
    // prompt with one media block per image.
    if (auto e = ValidateMessages(body, /*vision=*/true)) return e;
    if (auto e = CollectImages(body, format.vision, &out->images)) return e;
    std::vector<std::string> blocks;
    for (const ImageInput& img : out->images) blocks.push_back(MediaBlock(img.width, img.height));
    if (auto e = RenderXtml(body, format.default_thinking, &out->prompt, &blocks)) return e;
  } else if (format.kind == ChatFormat::Kind::kXtml) {
    if (auto e = RenderXtml(body, format.default_thinking, &out->prompt)) return e;
  } else {
    if (auto e = RenderChatJson(body, format.tmpl, &out->prompt, format.kimi_tools.ok())) return e;
  }
  if (auto e = ReplyGrammar(*out, format, &out->grammar, &out->grammar_triggers)) return e;
  // (A continued message is not a turn the follow-on could guess the next of.)
  const Json* continued = Field(body, "continue_final_message");
  if (out->images.empty() && !(continued && *continued == true)) {
    out->body = std::make_shared<const Json>(body);
  }
  SamplingRequest s;
  if (auto e = ParseSampling(body, &s)) return e;
  if (auto e = RefuseUnsupported(body, /*chat=*/true)) return e;
  if (auto e = ParseLogprobs(body, /*chat=*/true, &out->logprobs)) return e;
  if (auto e = CheckLogitBias(s, engine)) return e;
  auto ids = engine.TokenizeSegments(out->prompt.segments, /*add_bos=*/false);
  if (!ids) return EngineError("tokenize", ids.error());
  out->ids = std::move(*ids);
  if (out->ids.empty()) return BadRequest("the prompt is empty", "messages");
  // Each image's pad becomes its rows; the count needs no decode, so the
  // context check still happens before the request waits. (A model without
  // a tower only gets here in the golden tests, which force vision on over
  // the tokenizer container: there each pad stays one position.)
  size_t prompt_tokens = out->ids.size();
  for (const ImageInput& img : out->images) {
    if (!engine.has_vision()) continue;
    Result<int> rows = engine.ImageTokens({img.width, img.height});
    if (!rows) return EngineError("image", rows.error());
    prompt_tokens += static_cast<size_t>(*rows) - 1;
  }
  if (auto e = ContextCheck(prompt_tokens, limits)) return e;
  out->prompt_tokens = static_cast<int>(prompt_tokens);
  std::string predicted;
  if (auto e = ParsePrediction(body, &predicted)) return e;
  if (!predicted.empty()) {
    // As markup: a reply's text holds its special tokens as text (the
    // content a client sends back), and a prediction only steers the guesses.
    auto p = engine.Tokenize(predicted, /*markup=*/true, /*add_bos=*/false);
    if (!p) return EngineError("tokenize", p.error());
    out->prediction = std::move(*p);
    if (out->prediction.size() > limits.ctx_max) out->prediction.resize(limits.ctx_max);
  }
  // XTML: when the prompt opened the think channel; think tags: the model
  // decides whether it thinks, the cap applies if it does.
  if (out->prompt.think_channel ||
      (format.kind == ChatFormat::Kind::kChatJson && !format.tmpl.think_open.empty())) {
    out->thinking_budget = out->prompt.thinking_budget >= 0 ? out->prompt.thinking_budget
                                                            : format.default_thinking_budget;
  }
  out->choices = s.n;
  FillParams(s, limits, prompt_tokens, &out->params);
  out->params.logprobs = out->logprobs.on;
  out->params.top_logprobs = out->logprobs.top;
  out->params.stop_tokens = {format.stop_id};
  if (format.kimi_tools.ok() && out->prompt.tool_choice == "none") {
    // The tools stay declared (the conversation may hold calls); no new one.
    out->params.logit_bias.emplace_back(format.kimi_tools.section_begin,
                                        -std::numeric_limits<float>::infinity());
  }
  out->stops = std::move(s.stops);
  if (format.kind == ChatFormat::Kind::kChatJson) {
    // A reply that starts another turn's header has ended (the model is
    // inventing the next message): those headers stop it, hidden like any
    // stop string. The suffix is already the stop token.
    for (std::string& header : format.tmpl.ReplyStops()) {
      if (header != format.tmpl.assistant_suffix &&
          std::find(out->stops.begin(), out->stops.end(), header) == out->stops.end()) {
        out->stops.push_back(std::move(header));
      }
    }
  }
  return std::nullopt;
}

namespace {

// `prompt` as OpenAI takes it: a string, token ids (an array of
// integers), or a list of up to kMaxPrompts of either (an array of
// strings, or of arrays of integers). Ids are checked against the
// vocabulary; text is encoded in plain mode. `given_as_ids` says per prompt
// whether it came as ids (its echo is then the ids decoded).
std::optional<ApiError> ParseCompletionPrompts(const Json& body, const Engine& engine,
                                               std::vector<CompletionPrompt>* out,
                                               std::vector<bool>* given_as_ids) {
  const char* msg =
      "'prompt' must be a non-empty string, token ids (a non-empty array of integers), or a "
      "list of such prompts (an array of strings, or of arrays of integers)";
  auto it = body.find("prompt");
  if (it == body.end()) return BadRequest(msg, "prompt");
  const Json& p = *it;
  const int vocab = engine.info().vocab;
  auto is_id = [&](const Json& v) {
    return v.is_number_integer() && (v.is_number_unsigned() || v.get<int64_t>() >= 0) &&
           v.get<uint64_t>() < static_cast<uint64_t>(vocab);
  };
  // One prompt: `where` names it in an error ("prompt" or "prompt[i]").
  auto one = [&](const Json& v, const std::string& where) -> std::optional<ApiError> {
    CompletionPrompt prompt;
    if (v.is_string()) {
      prompt.echo_text = v.get<std::string>();
      if (prompt.echo_text.empty()) return BadRequest("'" + where + "' is an empty string", "prompt");
      std::vector<PromptSegment> segs{{SegmentMode::kPlain, prompt.echo_text}};
      auto encoded = engine.TokenizeSegments(segs, false);
      if (!encoded) return EngineError("tokenize", encoded.error());
      prompt.ids = std::move(*encoded);
      if (prompt.ids.empty()) return BadRequest("'" + where + "' tokenizes to nothing", "prompt");
      given_as_ids->push_back(false);
    } else {
      if (v.empty()) return BadRequest("'" + where + "' is an empty array", "prompt");
      for (const Json& id : v) {
        if (!is_id(id)) {
          return BadRequest("'" + where + "': token ids are integers below the vocabulary size " +
                                std::to_string(vocab),
                            "prompt");
        }
        prompt.ids.push_back(id.get<int>());
      }
      given_as_ids->push_back(true);
    }
    out->push_back(std::move(prompt));
    return std::nullopt;
  };
  if (p.is_string()) return one(p, "prompt");
  if (!p.is_array() || p.empty()) return BadRequest(msg, "prompt");
  if (p[0].is_number()) return one(p, "prompt");  // token ids (each checked there)
  if (p.size() > kMaxPrompts) {
    return BadRequest("'prompt' lists " + std::to_string(p.size()) + " prompts; at most " +
                          std::to_string(kMaxPrompts) + " in one request",
                      "prompt");
  }
  const bool strings = p[0].is_string();
  for (size_t i = 0; i < p.size(); ++i) {
    if (strings ? !p[i].is_string() : !p[i].is_array()) return BadRequest(msg, "prompt");
    if (auto e = one(p[i], "prompt[" + std::to_string(i) + "]")) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> PrepareCompletion(const Json& body, const ChatFormat& format,
                                          const Engine& engine, const ServeLimits& limits,
                                          PreparedCompletion* out) {
  std::vector<bool> given_as_ids;
  if (auto e = ParseCompletionPrompts(body, engine, &out->prompts, &given_as_ids)) return e;
  if (auto e = ParseStream(body, &out->stream, &out->include_usage)) return e;
  if (auto e = ParseLogprobs(body, /*chat=*/false, &out->logprobs)) return e;
  SamplingRequest s;
  if (auto e = ParseSampling(body, &s, /*allow_zero_max=*/out->logprobs.echo)) return e;
  if (auto e = RefuseUnsupported(body, /*chat=*/false)) return e;
  if (auto e = ParseBestOf(body, s.n, out->stream, &out->best_of)) return e;
  out->choices = s.n;
  if (auto e = CheckLogitBias(s, engine)) return e;
  out->score_only = s.max_tokens && *s.max_tokens == 0;
  for (size_t i = 0; i < out->prompts.size(); ++i) {
    CompletionPrompt& prompt = out->prompts[i];
    if (auto e = ContextCheck(prompt.ids.size(), limits)) {
      if (out->prompts.size() > 1) e->message = "prompt[" + std::to_string(i) + "]: " + e->message;
      e->param = "prompt";
      return e;
    }
    prompt.max_tokens = MaxTokensFor(s, limits, prompt.ids.size());
    if (!out->logprobs.echo) {
      prompt.echo_text.clear();
    } else if (given_as_ids[i]) {
      auto decoded = engine.Detokenize(prompt.ids);
      if (!decoded) return EngineError("detokenize", decoded.error());
      prompt.echo_text = std::move(*decoded);
    }
  }
  FillParams(s, limits, out->prompts[0].ids.size(), &out->params);
  if (format.stop_id >= 0) out->params.stop_tokens = {format.stop_id};
  out->stops = std::move(s.stops);
  out->params.logprobs = out->logprobs.on;
  out->params.top_logprobs = out->logprobs.top;
  return std::nullopt;
}

}  // namespace waste::server
