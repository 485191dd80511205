#include "generate.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include "chat_turn.h"
#include "constraint.h"
#include "follow_on.h"
#include "logprobs.h"

namespace waste::server {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Generate's outcome as the Status these routes reason about: a callback
// that stopped the run is kCancelled, as before Generate returned a reason.
Status AsStatus(const Result<FinishReason>& finished) {
  if (!finished) return finished.error();
  if (*finished == FinishReason::kCancelled) return Status(Errc::kCancelled, "cancelled by callback");
  return Status::Ok();
}

ApiError EngineFailure(const Status& st, const Session* session) {
  if (st.code() == Errc::kBusy) {  // every slot held (more workers than slots)
    return ApiError{503, "server_busy", st.message(), std::nullopt, std::nullopt};
  }
  std::string detail = st.message().empty() && session ? session->error_detail() : st.message();
  std::string msg = std::string("generate: ") + ErrcText(st.code());
  if (!detail.empty()) msg += " (" + detail + ")";
  return ApiError{500, "engine_error", msg, std::nullopt, std::nullopt};
}

// The model's image queue for a request that uses it: one with images, or
// whose prompt holds a media pad (token ids may name one). Held until its
// prompt is fed (the first token, or the end), so concurrent requests never
// see each other's images; the queue starts empty (nothing a failed request
// queued may leak into this one). A request that does not use it gets an
// empty lock and leaves the queue alone: the engine arms the queue only for
// a call whose tokens hold a pad.
std::unique_lock<std::mutex> ImageQueueFor(Engine& engine, SessionPool& pool, bool has_images,
                                           std::span<const int> ids) {
  const int pad = engine.media_pad_id();
  if (!has_images && (pad < 0 || std::find(ids.begin(), ids.end(), pad) == ids.end())) return {};
  std::unique_lock<std::mutex> lock(pool.image_queue());
  engine.ClearImages();
  return lock;
}

// Gives the queue back, cleared, once the request's prompt has been fed
// (Done, at its first token) or when it ends, whichever comes first.
struct ImageQueueHold {
  Engine& engine;
  std::unique_lock<std::mutex> lock;
  void Done() {
    if (!lock.owns_lock()) return;
    engine.ClearImages();
    lock.unlock();
  }
  ~ImageQueueHold() { Done(); }
};

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

// The end of both routes' token callbacks: whether generation goes on. The
// turn says whether it wants more (`more`: no end marker or stop string
// yet); a cancelled request or a client gone stops it and marks the result.
bool GoOn(bool more, const std::atomic<bool>& cancel, bool client_gone, bool* turn_stopped,
          GenerateResult* r) {
  if (!more) *turn_stopped = true;
  if (cancel.load() || client_gone) {
    r->cancelled = true;
    return false;
  }
  return more;
}

// A failure before the first token: the blocking reply's status, or (the
// event-stream headers are out) an error event and the end of the stream.
GenerateResult FailBeforeFirstToken(GenerateResult r, const ApiError& e, const EventSink& sink) {
  if (!sink) {
    r.error = e;
    return r;
  }
  sink("data: " + ErrorBody(e) + "\n\n");
  sink("data: [DONE]\n\n");
  return r;
}

}  // namespace

// usage with the prompt tokens restored from a snapshot and the thinking
// tokens among the completion's (OpenAI's fields).
Json UsageWithCache(const GenerateResult& r) {
  Json u = Usage(r.prompt_tokens, r.completion_tokens);
  u["prompt_tokens_details"] = {{"cached_tokens", r.cached_tokens}};
  u["completion_tokens_details"] = {{"reasoning_tokens", r.reasoning_tokens}};
  return u;
}

GenerateResult GenerateChat(Engine& engine, SessionPool& pool, const PreparedChat& chat,
                            const ChatFormat& format, const ReplyHeader& header,
                            const EventSink& sink, const std::atomic<bool>& cancel) {
  GenerateResult r;
  r.prompt_tokens = chat.prompt_tokens > 0 ? chat.prompt_tokens : static_cast<int>(chat.ids.size());
  auto fail = [&](const ApiError& e) { return FailBeforeFirstToken(r, e, sink); };
  ImageQueueHold images{engine, ImageQueueFor(engine, pool, !chat.images.empty(), chat.ids)};
  if (cancel.load()) {  // left while waiting for the queue
    r.cancelled = true;
    return r;
  }
  std::vector<int> ids;
  if (auto e = AttachImages(engine, chat, &ids)) return fail(*e);
  ReplyParser parser = format.kind == ChatFormat::Kind::kXtml
                           ? ReplyParser(format.markers, chat.prompt.think_channel)
                           : ReplyParser(format.stop_id);
  int eos = engine.info().eos_id;
  if (eos == format.stop_id) eos = -1;
  ChatTurn turn(std::move(parser), chat.stops, eos);
  std::vector<Json> deltas;
  // logprobs.content: every generated token but the end of the reply; a
  // stream sends each token's entry on the last chunk of the first flush
  // that sends anything after it (text held back for a stop string or a
  // split character comes later).
  Json logprobs = Json::array();
  bool client_gone = false;
  auto flush = [&]() {
    if (!sink) {
      deltas.clear();
      return;
    }
    for (size_t i = 0; i < deltas.size(); ++i) {
      Json chunk = DeltaChunk(header, deltas[i], nullptr);
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
  std::unique_ptr<BudgetedGrammar> constraint;
  if (chat.grammar && format.vocab) {
    constraint = std::make_unique<BudgetedGrammar>(chat.grammar, format.vocab, params.max_tokens,
                                                      chat.grammar_triggers);
    params.constraint = constraint.get();
  }
  auto t0 = Clock::now();
  // Prefill stops within a span when the client goes away.
  auto gone = [&] {
    if (cancel.load()) r.cancelled = true;
    return r.cancelled;
  };
  params.on_prefill = [&](int, int) { return !gone(); };
  Result<SessionPool::Run> run = pool.Prepare(ids, gone);
  if (!run && r.cancelled) return r;
  if (!run) return fail(EngineFailure(run.error(), nullptr));
  r.cached_tokens = run->cached_tokens;
  r.resumed_ahead = run->resumed_ahead;
  r.restored = run->restored;
  int delivered = 0;
  bool turn_stopped = false;
  Status st = AsStatus(run->session->Generate(run->rest, params, [&](const TokenEvent& ev) {
    if (delivered++ == 0) {
      r.prefill_ms = MsSince(t0);
      images.Done();  // the prompt's pads are fed
    }
    if (chat.logprobs.on && ev.token != format.stop_id && ev.token != engine.info().eos_id) {
      logprobs.push_back(ChatLogprobEntry(engine, ev.token, ev.piece, ev.logprob, ev.top_logprobs));
    }
    bool more = turn.OnToken(ev.token, ev.piece, &deltas);
    flush();
    return GoOn(more, cancel, client_gone, &turn_stopped, &r);
  }));
  r.total_ms = MsSince(t0);
  r.completion_tokens = turn.completion_tokens();
  r.reasoning_tokens = turn.reasoning_tokens();
  bool failed = !st.ok() && !(st.code() == Errc::kCancelled && (turn_stopped || r.cancelled));
  if (r.cancelled) return r;
  // After the headers an error can only be an event (never a second HTTP
  // response inside the body).
  if (failed) return fail(EngineFailure(st, run->session));
  turn.Finish(&deltas);
  bool ran_to_max = st.ok() && delivered == chat.params.max_tokens;
  std::string finish = turn.FinishReason(ran_to_max);
  Json usage = UsageWithCache(r);
  Json waste = WasteCounters(run->before, run->session->stats(), r.total_ms);
  if (chat.body) {
    r.follow_on = pool.ReserveFollowOn(*run);
    if (r.follow_on) {
      r.next_turn = [&engine, &format, body = chat.body, reply = turn.Message()] {
        return NextTurnPrefix(engine, format, *body, reply);
      };
    }
  }
  if (!sink) {
    r.body = ChatCompletion(header, turn.Message(), finish, usage, waste);
    if (chat.logprobs.on) r.body["choices"][0]["logprobs"] = ChatLogprobs(std::move(logprobs));
    return r;
  }
  flush();
  // OpenAI's ending: the finish chunk (ours also carries `waste`), and only
  // with include_usage a chunk whose choices are [] carrying `usage`.
  Json last = FinishChunk(header, finish, waste);
  if (!logprobs.empty()) last["choices"][0]["logprobs"] = ChatLogprobs(std::move(logprobs));
  if (chat.include_usage) last = WithNullUsage(std::move(last));
  sink(SseEvent(last));
  if (chat.include_usage) sink(SseEvent(UsageChunk(header, usage)));
  sink("data: [DONE]\n\n");
  return r;
}

GenerateResult GenerateCompletion(Engine& engine, SessionPool& pool, const PreparedCompletion& req,
                                  const ChatFormat& format, const ReplyHeader& header,
                                  const EventSink& sink, const std::atomic<bool>& cancel) {
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(req.ids.size());
  auto fail = [&](const ApiError& e) { return FailBeforeFirstToken(r, e, sink); };
  auto t0 = Clock::now();
  int eos = engine.info().eos_id;
  if (eos == format.stop_id) eos = -1;
  // Pads in a token-id prompt find the queue empty (this request's alone).
  ImageQueueHold images{engine, ImageQueueFor(engine, pool, false, req.ids)};
  // The text is the reply parser's plain form: every piece is text until the
  // format's stop token; the end-of-sequence piece is not text.
  ChatTurn turn(ReplyParser(format.stop_id), req.stops, eos);
  std::vector<Json> deltas;
  const bool echo = req.logprobs.echo;
  const bool scored_prompt = echo && req.logprobs.on;  // every prompt position's logprob
  std::vector<TokenScore> prompt_scores;
  CompletionLogprobs logprobs(engine);
  // The echoed prompt and its logprobs: sent once, before the first
  // generated token (or at the end when none comes).
  bool echo_due = echo;
  auto add_prompt = [&]() {
    if (!scored_prompt) return;
    for (size_t i = 0; i < req.ids.size(); ++i) {
      const int id = req.ids[i];
      const std::string piece = engine.TokenPiece(id);
      if (i == 0 || i - 1 >= prompt_scores.size()) {
        logprobs.Add(id, piece, std::nullopt, {});
      } else {
        const TokenScore& sc = prompt_scores[i - 1];
        logprobs.Add(id, piece, sc.logprob, sc.top);
      }
    }
  };
  bool client_gone = false;
  auto send = [&](const std::string& text) {
    Json chunk = TextChunk(header, text, nullptr);
    if (!logprobs.empty()) chunk["choices"][0]["logprobs"] = logprobs.Take();
    if (req.include_usage) chunk = WithNullUsage(std::move(chunk));
    if (!client_gone && !sink(SseEvent(chunk))) client_gone = true;
  };
  auto emit_echo = [&]() {
    if (!echo_due) return;
    echo_due = false;
    add_prompt();
    if (sink) send(SanitizeUtf8(req.echo_text));
  };
  auto flush = [&]() {
    emit_echo();
    for (Json& d : deltas) {
      auto text = d.find("content");
      if (!sink || text == d.end() || text->get_ref<const std::string&>().empty()) continue;
      send(text->get<std::string>());
    }
    deltas.clear();
  };
  // A client that leaves during prefill stops it within a span.
  auto gone = [&] {
    if (cancel.load()) r.cancelled = true;
    return r.cancelled;
  };
  GenParams params = req.params;
  params.on_prefill = [&](int, int) { return !gone(); };
  if (scored_prompt) params.prompt_scores = &prompt_scores;
  int delivered = 0;
  bool turn_stopped = false;
  Status st = Status::Ok();
  Session* session = nullptr;
  SessionPool::Run held;  // the slot, until the reply is built
  if (req.score_only) {
    // max_tokens 0 with echo: the prompt only, scored span by span from a
    // fresh slot (a span boundary's last row scores the next span's first
    // token, so the pieces are one call's scores).
    if (scored_prompt) {
      Result<SessionPool::Run> run = pool.PrepareFresh(req.ids);
      if (!run) return fail(EngineFailure(run.error(), nullptr));
      held = std::move(*run);
      session = held.session;
      const std::span<const int> ids(req.ids);
      const size_t span = SessionPool::kSpan;
      for (size_t at = 0; at < ids.size() && st.ok(); at += span) {
        if (gone()) return r;
        const size_t n = std::min(span, ids.size() - at);
        const int next = at + n < ids.size() ? ids[at + n] : -1;
        Result<std::vector<TokenScore>> part = session->ScoreTop(ids.subspan(at, n), req.logprobs.top, next);
        if (!part) {
          st = part.error();
          break;
        }
        prompt_scores.insert(prompt_scores.end(), std::make_move_iterator(part->begin()),
                             std::make_move_iterator(part->end()));
      }
      if (!st.ok()) return fail(EngineFailure(st, session));
    }
    r.prefill_ms = MsSince(t0);
  } else {
    // Scoring needs every prompt position computed: no prefix reuse then.
    Result<SessionPool::Run> run = scored_prompt ? pool.PrepareFresh(req.ids) : pool.Prepare(req.ids, gone);
    if (!run && r.cancelled) return r;
    if (!run) return fail(EngineFailure(run.error(), nullptr));
    held = std::move(*run);
    r.cached_tokens = held.cached_tokens;
    r.restored = held.restored;
    session = held.session;
    st = AsStatus(session->Generate(held.rest, params, [&](const TokenEvent& ev) {
      if (delivered++ == 0) {
        r.prefill_ms = MsSince(t0);
        images.Done();  // the prompt's pads are fed
      }
      bool more = turn.OnToken(ev.token, ev.piece, &deltas);
      emit_echo();  // the prompt's entries come before the first token's
      if (req.logprobs.on) logprobs.Add(ev.token, ev.piece, ev.logprob, ev.top_logprobs);
      flush();
      return GoOn(more, cancel, client_gone, &turn_stopped, &r);
    }));
  }
  r.total_ms = MsSince(t0);
  r.completion_tokens = turn.completion_tokens();
  r.reasoning_tokens = turn.reasoning_tokens();
  if (r.cancelled) return r;
  if (!st.ok() && !(st.code() == Errc::kCancelled && turn_stopped)) {
    return fail(EngineFailure(st, session));
  }
  turn.Finish(&deltas);
  bool ran_to_max = req.score_only || (st.ok() && delivered == req.params.max_tokens);
  std::string finish = turn.FinishReason(ran_to_max);
  Json usage = UsageWithCache(r);
  Json waste = session != nullptr ? WasteCounters(held.before, session->stats(), r.total_ms)
                                   : WasteCounters(Stats{}, Stats{}, r.total_ms);
  if (!sink) {
    flush();  // the echoed prompt's entries, when no token came
    const Json message = turn.Message();
    const Json& content = message["content"];
    std::string text = echo ? req.echo_text : std::string();
    if (content.is_string()) text += content.get<std::string>();
    r.body = {{"id", header.id},
              {"object", "text_completion"},
              {"created", header.created},
              {"model", header.model},
              {"choices", Json::array({{{"index", 0},
                                        {"text", SanitizeUtf8(text)},
                                        {"logprobs", req.logprobs.on ? logprobs.Take() : Json(nullptr)},
                                        {"finish_reason", finish}}})},
              {"usage", usage},
              {"waste", waste}};
    return r;
  }
  flush();
  Json last = TextChunk(header, "", finish);
  if (!logprobs.empty()) last["choices"][0]["logprobs"] = logprobs.Take();
  last["waste"] = waste;
  if (req.include_usage) last = WithNullUsage(std::move(last));
  sink(SseEvent(last));
  if (req.include_usage) sink(SseEvent(UsageChunk(header, usage, "text_completion")));
  sink("data: [DONE]\n\n");
  return r;
}

}  // namespace waste::server
