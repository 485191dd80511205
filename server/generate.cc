#include "generate.h"

#include <algorithm>

#include "chat_turn.h"
#include "constraint.h"
#include "follow_on.h"
#include "generate_common.h"
#include "logprobs.h"
#include "thinking_budget.h"

namespace waste::server {
namespace {

// The request's images encoded and queued on the model (the tower runs
// here, on the request's engine thread, while the request holds the queue),
// and the prompt with each pad expanded to its image's rows. The header was
// probed before queueing; a body that fails to decode is still the
// request's fault (400), anything else the engine's.
std::optional<ApiError> AttachImages(Engine& engine, const PreparedChat& chat,
                                     std::vector<int>* ids) {
  if (chat.images.empty()) {
    *ids = chat.ids;
    return std::nullopt;
  }
  for (const ImageInput& img : chat.images) {
    Result<int> rows = engine.AddImageBytes(img.bytes, img.where);
    if (!rows) {
      engine.ClearImages();
      if (rows.error().code() == Errc::kIo) {
        return BadRequest("the image in " + img.where + " cannot be used: " +
                              rows.error().message(),
                          "image_url", "invalid_image");
      }
      return ApiError{500, "engine_error", "image: " + rows.error().ToString(), std::nullopt,
                      std::nullopt};
    }
  }
  Result<std::vector<int>> expanded = engine.ExpandImagePads(chat.ids);
  if (!expanded) {
    engine.ClearImages();
    return ApiError{500, "engine_error", "image: " + expanded.error().ToString(), std::nullopt,
                    std::nullopt};
  }
  *ids = std::move(*expanded);
  return std::nullopt;
}

}  // namespace

GenerateResult GenerateChat(Engine& engine, SessionPool& pool, const PreparedChat& chat,
                            const ChatFormat& format, const ReplyHeader& header,
                            const EventSink& sink, const std::atomic<bool>& cancel) {
  GenerateResult r;
  r.prompt_tokens = chat.prompt_tokens > 0 ? chat.prompt_tokens : static_cast<int>(chat.ids.size());
  auto fail = [&](const ApiError& e) { return FailRequest(r, e, sink); };
  ImageQueueHold images{engine, ImageQueueFor(engine, pool, !chat.images.empty(), chat.ids)};
  if (cancel.load()) {  // left while waiting for the queue
    r.cancelled = true;
    return r;
  }
  std::vector<int> ids;
  if (auto e = AttachImages(engine, chat, &ids)) return fail(*e);
  int eos = engine.info().eos_id;
  if (eos == format.stop_id) eos = -1;
  auto t0 = Clock::now();
  // Prefill stops within a span when the client goes away.
  auto gone = [&] {
    if (cancel.load()) r.cancelled = true;
    return r.cancelled;
  };
  // The system prompt's and tools' tokens (a point kept there serves the
  // client's next conversations).
  const size_t shared = chat.body && pool.KeepsSharedPoints()
                            ? SharedPrefixLength(engine, format, *chat.body, ids)
                            : 0;
  Result<SessionPool::Run> run = pool.Prepare(ids, gone, shared);
  if (!run && r.cancelled) return r;
  if (!run) return fail(EngineFailure(run.error(), nullptr));
  r.cached_tokens = run->cached_tokens;
  r.resumed_ahead = run->resumed_ahead;
  r.resumed_earlier = run->resumed_earlier;
  r.restored = run->restored;
  const int n = chat.choices;
  bool client_gone = false;
  Json choices = Json::array();  // blocking: a ChatChoice per reply
  Json message, usage, waste;    // the last reply's message; the request's usage and counters
  for (int index = 0; index < n; ++index) {
    const bool last_choice = index + 1 == n;
    if (index > 0) {
      // Each reply starts from the prompt, as a request of its own would
      // (the same bits; only its seed differs, ChoiceSeed).
      Status back = pool.Restart(*run);
      if (!back.ok()) return fail(EngineFailure(back, run->session));
      std::vector<int> again;  // the engine let the images go with the call that fed them
      if (auto e = AttachImages(engine, chat, &again)) return fail(*e);
    }
    ReplyParser parser = format.kind == ChatFormat::Kind::kXtml
                             ? ReplyParser(format.markers, chat.prompt.think_channel)
                             : ReplyParser(format.stop_id, format.tmpl.think_open,
                                           format.tmpl.think_close);
    if (format.kind == ChatFormat::Kind::kChatJson && format.kimi_tools.ok()) {
      parser.EnableKimiTools(format.kimi_tools, chat.prompt.parallel_tool_calls ? -1 : 1);
    }
    ChatTurn turn(std::move(parser), chat.stops, eos);
    std::vector<Json> deltas;
    // logprobs.content: every generated token but the end of the reply; a
    // stream sends each token's entry on the last chunk of the first flush
    // that sends anything after it (text held back for a stop string or a
    // split character comes later).
    Json logprobs = Json::array();
    auto flush = [&]() {
      if (!sink) {
        deltas.clear();
        return;
      }
      for (size_t i = 0; i < deltas.size(); ++i) {
        Json chunk = DeltaChunk(header, deltas[i], nullptr, index);
        // On the flush's last chunk: the one with the newest token's text
        // (the first may be the role chunk).
        if (i + 1 == deltas.size() && !logprobs.empty()) {
          chunk["choices"][0]["logprobs"] = ChatLogprobs(std::move(logprobs));
          logprobs = Json::array();
        }
        if (chat.include_usage) chunk = WithNullUsage(std::move(chunk));
        if (!client_gone && !sink(SseEvent(chunk))) client_gone = true;
      }
      deltas.clear();
    };
    GenParams params = chat.params;
    params.seed = ChoiceSeed(params.seed, index);
    params.draft_context = PrefixBefore(ids, run->rest);
    params.draft_prediction = chat.prediction;
    std::unique_ptr<BudgetedGrammar> constraint;  // its state is the reply's
    if (chat.grammar && format.vocab) {
      constraint = std::make_unique<BudgetedGrammar>(chat.grammar, format.vocab, params.max_tokens,
                                                     chat.grammar_triggers);
      params.constraint = constraint.get();
    }
    std::unique_ptr<TokenConstraint> thinking_budget;
    if (chat.thinking_budget >= 0 && format.kind == ChatFormat::Kind::kXtml) {
      thinking_budget = std::make_unique<ThinkingBudget>(chat.thinking_budget, format.think_close_ids,
                                                         format.markers, constraint.get());
      params.constraint = thinking_budget.get();
    } else if (chat.thinking_budget >= 0 && format.kind == ChatFormat::Kind::kChatJson) {
      thinking_budget = ThinkTagBudget::ForTemplate(engine, format.tmpl, chat.thinking_budget,
                                                    constraint.get());
      if (thinking_budget) params.constraint = thinking_budget.get();
    }
    params.on_prefill = [&](int, int) { return !gone(); };
    int delivered = 0;
    bool turn_stopped = false;
    Status st = AsStatus(run->session->Generate(run->rest, params, [&](const TokenEvent& ev) {
      if (delivered++ == 0) {
        if (index == 0) r.prefill_ms = MsSince(t0);
        if (last_choice) images.Done();  // the prompt's pads are fed for the last time
      }
      bool more = turn.OnToken(ev.token, ev.piece, &deltas);
      if (chat.logprobs.on && ev.token != format.stop_id && ev.token != engine.info().eos_id &&
          (!chat.logprobs.message_text_only || turn.last_token_in_content())) {
        logprobs.push_back(ChatLogprobEntry(engine, ev.token, ev.piece, ev.logprob, ev.top_logprobs));
      }
      flush();
      return GoOn(more, cancel, client_gone, &turn_stopped, &r);
    }));
    r.total_ms = MsSince(t0);
    r.completion_tokens += turn.completion_tokens();
    r.reasoning_tokens += turn.reasoning_tokens();
    bool failed = !st.ok() && !(st.code() == Errc::kCancelled && (turn_stopped || r.cancelled));
    if (r.cancelled) return r;
    // After the headers an error can only be an event (never a second HTTP
    // response inside the body).
    if (failed) return fail(EngineFailure(st, run->session));
    turn.Finish(&deltas);
    bool ran_to_max = st.ok() && delivered == chat.params.max_tokens;
    const std::string finish = turn.FinishReason(ran_to_max);
    message = turn.Message();
    if (last_choice) {
      const Stats after = run->session->stats();
      CountDrafts(run->before, after, &r);
      usage = UsageWithCache(r);
      waste = WasteCounters(run->before, after, r.total_ms);
    }
    if (!sink) {
      choices.push_back(ChatChoice(index, message, finish,
                                   chat.logprobs.on ? ChatLogprobs(std::move(logprobs)) : Json(nullptr)));
      if (chat.report_stop_string && !turn.matched_stop().empty()) {
        choices.back()["stop_string"] = turn.matched_stop();
      }
      continue;
    }
    flush();
    // OpenAI's ending of a choice: its finish chunk (the last one's also
    // carries `waste`).
    Json end = FinishChunk(header, finish, last_choice ? waste : Json(nullptr), index);
    if (!logprobs.empty()) end["choices"][0]["logprobs"] = ChatLogprobs(std::move(logprobs));
    if (chat.report_stop_string && !turn.matched_stop().empty()) {
      end["choices"][0]["stop_string"] = turn.matched_stop();
    }
    if (chat.include_usage) end = WithNullUsage(std::move(end));
    if (!client_gone && !sink(SseEvent(end))) client_gone = true;
    if (client_gone && !last_choice) {  // no use generating what nobody reads
      r.cancelled = true;
      return r;
    }
  }
  // The follow-on guesses the next turn from the reply, so only when there
  // is one (with several, the client's pick is unknown).
  if (chat.body && n == 1) {
    r.follow_on = pool.ReserveFollowOn(*run);
    if (r.follow_on) {
      r.next_turn = [&engine, &format, body = chat.body, reply = message] {
        return NextTurnPrefix(engine, format, *body, reply);
      };
    }
  }
  if (!sink) {
    r.body = ChatCompletion(header, std::move(choices), usage, waste);
    return r;
  }
  // With include_usage only, OpenAI's chunk whose choices are [] carrying `usage`.
  if (chat.include_usage) sink(SseEvent(UsageChunk(header, usage)));
  sink("data: [DONE]\n\n");
  return r;
}

}  // namespace waste::server
