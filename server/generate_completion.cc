// /v1/completions on the engine (generate.h): plain text after the prompt,
// `echo` and its scored prompt, several prompts in one request, several
// completions per prompt and `best_of`.
#include <algorithm>
#include <iterator>

#include "chat_turn.h"
#include "generate.h"
#include "generate_common.h"
#include "logprobs.h"

namespace waste::server {
namespace {

// Whether any prompt holds the model's media pad (token ids may name one).
bool AnyPad(const Engine& engine, const PreparedCompletion& req) {
  const int pad = engine.media_pad_id();
  return pad >= 0 && std::any_of(req.prompts.begin(), req.prompts.end(), [&](const CompletionPrompt& p) {
           return std::find(p.ids.begin(), p.ids.end(), pad) != p.ids.end();
         });
}

}  // namespace

GenerateResult GenerateCompletion(Engine& engine, SessionPool& pool, const PreparedCompletion& req,
                                  const ChatFormat& format, const ReplyHeader& header,
                                  const EventSink& sink, const std::atomic<bool>& cancel) {
  GenerateResult r;
  auto fail = [&](const ApiError& e) { return FailRequest(r, e, sink); };
  auto t0 = Clock::now();
  int eos = engine.info().eos_id;
  if (eos == format.stop_id) eos = -1;
  // Pads in a token-id prompt find the queue empty (this request's alone).
  ImageQueueHold images{engine, ImageQueueFor(engine, pool, AnyPad(engine, req), {})};
  const bool echo = req.logprobs.echo;
  const bool scored_prompt = echo && req.logprobs.on;  // every prompt position's logprob
  // A client that leaves during prefill stops it within a span.
  auto gone = [&] {
    if (cancel.load()) r.cancelled = true;
    return r.cancelled;
  };
  // best_of > n (blocking only): every candidate is generated with its
  // tokens' log-probabilities, and the n with the highest mean are returned.
  const int candidates = req.score_only ? req.choices : req.best_of;
  const bool ranked = candidates > req.choices;
  struct Candidate {
    Json choice;          // the `choices` entry (its index set when ranked)
    double mean_logprob;  // over its generated tokens (ranking)
  };
  Json choices = Json::array();  // blocking: every prompt's, in order
  bool client_gone = false;
  Stats traffic;  // the request's expert traffic, added up slot by slot (one per prompt)
  for (size_t p = 0; p < req.prompts.size(); ++p) {
    const CompletionPrompt& prompt = req.prompts[p];
    const bool last_prompt = p + 1 == req.prompts.size();
    r.prompt_tokens += static_cast<int>(prompt.ids.size());
    std::vector<TokenScore> prompt_scores;
    Status st = Status::Ok();
    // The previous prompt's slot goes back before this one's is taken (with
    // one slot there would be none free otherwise).
    SessionPool::Run held;  // the slot, until the prompt's choices are built
    Session* session = nullptr;
    if (req.score_only) {
      // max_tokens 0 with echo: the prompt only, scored span by span from a
      // fresh slot (a span boundary's last row scores the next span's first
      // token, so the pieces are one call's scores).
      if (scored_prompt) {
        Result<SessionPool::Run> run = pool.PrepareFresh(prompt.ids);
        if (!run) return fail(EngineFailure(run.error(), nullptr));
        held = std::move(*run);
        session = held.session;
        const std::span<const int> ids(prompt.ids);
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
      if (p == 0) r.prefill_ms = MsSince(t0);
    } else {
      // Scoring needs every prompt position computed: no prefix reuse then.
      Result<SessionPool::Run> run = scored_prompt ? pool.PrepareFresh(prompt.ids) : pool.Prepare(prompt.ids, gone);
      if (!run && r.cancelled) return r;
      if (!run) return fail(EngineFailure(run.error(), nullptr));
      held = std::move(*run);
      r.cached_tokens += held.cached_tokens;
      r.restored = r.restored || held.restored;
      r.resumed_earlier = r.resumed_earlier || held.resumed_earlier;
      session = held.session;
    }
    std::vector<Candidate> done;
    for (int k = 0; k < candidates; ++k) {
      const int index = static_cast<int>(p) * req.choices + k;  // OpenAI's numbering
      const bool last_choice = last_prompt && k + 1 == candidates;
      if (k > 0 && !req.score_only) {
        // Each completion starts from the prompt, as a request of its own
        // would (a scored prompt's slot is fed it again, unscored).
        Status back = pool.Restart(held);
        if (!back.ok()) return fail(EngineFailure(back, session));
      }
      // The text is the reply parser's plain form: every piece is text until
      // the format's stop token; the end-of-sequence piece is not text.
      ChatTurn turn(ReplyParser(format.stop_id), req.stops, eos);
      std::vector<Json> deltas;
      CompletionLogprobs logprobs(engine);
      double logprob_sum = 0;
      // The echoed prompt and its logprobs: sent once per completion, before
      // its first generated token (or at the end when none comes).
      bool echo_due = echo;
      auto add_prompt = [&]() {
        if (!scored_prompt) return;
        for (size_t i = 0; i < prompt.ids.size(); ++i) {
          const int id = prompt.ids[i];
          const std::string piece = engine.TokenPiece(id);
          if (i == 0 || i - 1 >= prompt_scores.size()) {
            logprobs.Add(id, piece, std::nullopt, {});
          } else {
            const TokenScore& sc = prompt_scores[i - 1];
            logprobs.Add(id, piece, sc.logprob, sc.top);
          }
        }
      };
      auto send = [&](const std::string& text) {
        Json chunk = TextChunk(header, text, nullptr, index);
        if (!logprobs.empty()) chunk["choices"][0]["logprobs"] = logprobs.Take();
        if (req.include_usage) chunk = WithNullUsage(std::move(chunk));
        if (!client_gone && !sink(SseEvent(chunk))) client_gone = true;
      };
      auto emit_echo = [&]() {
        if (!echo_due) return;
        echo_due = false;
        add_prompt();
        if (sink) send(SanitizeUtf8(prompt.echo_text));
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
      int delivered = 0;
      bool turn_stopped = false;
      if (!req.score_only) {
        GenParams params = req.params;
        params.max_tokens = prompt.max_tokens;
        params.seed = ChoiceSeed(params.seed, k);
        params.draft_context = PrefixBefore(prompt.ids, held.rest);
        params.logprobs = req.logprobs.on || ranked;
        params.on_prefill = [&](int, int) { return !gone(); };
        if (scored_prompt && k == 0) params.prompt_scores = &prompt_scores;
        st = AsStatus(session->Generate(held.rest, params, [&](const TokenEvent& ev) {
          if (delivered++ == 0) {
            if (p == 0 && k == 0) r.prefill_ms = MsSince(t0);
            if (last_choice) images.Done();  // the pads are fed for the last time
          }
          logprob_sum += ev.logprob;
          bool more = turn.OnToken(ev.token, ev.piece, &deltas);
          emit_echo();  // the prompt's entries come before the first token's
          if (req.logprobs.on) logprobs.Add(ev.token, ev.piece, ev.logprob, ev.top_logprobs);
          flush();
          return GoOn(more, cancel, client_gone, &turn_stopped, &r);
        }));
      }
      r.total_ms = MsSince(t0);
      r.completion_tokens += turn.completion_tokens();
      r.reasoning_tokens += turn.reasoning_tokens();
      if (r.cancelled) return r;
      if (!st.ok() && !(st.code() == Errc::kCancelled && turn_stopped)) {
        return fail(EngineFailure(st, session));
      }
      turn.Finish(&deltas);
      bool ran_to_max = req.score_only || (st.ok() && delivered == prompt.max_tokens);
      const std::string finish = turn.FinishReason(ran_to_max);
      if (k + 1 == candidates && session != nullptr) AddTraffic(held.before, session->stats(), &traffic);
      if (!sink) {
        flush();  // the echoed prompt's entries, when no token came
        const Json message = turn.Message();
        const Json& content = message["content"];
        std::string text = echo ? prompt.echo_text : std::string();
        if (content.is_string()) text += content.get<std::string>();
        done.push_back({{{"index", index},
                         {"text", SanitizeUtf8(text)},
                         {"logprobs", req.logprobs.on ? logprobs.Take() : Json(nullptr)},
                         {"finish_reason", finish}},
                        delivered > 0 ? logprob_sum / delivered : 0.0});
        continue;
      }
      flush();
      Json end = TextChunk(header, "", finish, index);
      if (!logprobs.empty()) end["choices"][0]["logprobs"] = logprobs.Take();
      if (last_choice) end["waste"] = WasteCounters(Stats{}, traffic, r.total_ms);
      if (req.include_usage) end = WithNullUsage(std::move(end));
      if (!client_gone && !sink(SseEvent(end))) client_gone = true;
      if (client_gone && !last_choice) {  // no use generating what nobody reads
        r.cancelled = true;
        return r;
      }
    }
    if (ranked) {
      // The most likely per token first; a tie keeps the earlier candidate.
      std::stable_sort(done.begin(), done.end(), [](const Candidate& a, const Candidate& b) {
        return a.mean_logprob > b.mean_logprob;
      });
      done.resize(static_cast<size_t>(req.choices));
      for (size_t j = 0; j < done.size(); ++j) {
        done[j].choice["index"] = p * static_cast<size_t>(req.choices) + j;
      }
    }
    for (Candidate& c : done) choices.push_back(std::move(c.choice));
  }
  CountDrafts(Stats{}, traffic, &r);
  const Json usage = UsageWithCache(r);
  if (!sink) {
    r.body = {{"id", header.id},
              {"object", "text_completion"},
              {"created", header.created},
              {"model", header.model},
              {"choices", std::move(choices)},
              {"usage", usage},
              {"waste", WasteCounters(Stats{}, traffic, r.total_ms)}};
    return r;
  }
  if (req.include_usage) sink(SseEvent(UsageChunk(header, usage, "text_completion")));
  sink("data: [DONE]\n\n");
  return r;
}

}  // namespace waste::server
