#include "http_server.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <set>

#include "chat_turn.h"
#include "engine_worker.h"
#include "generate.h"
#include "generate_common.h"
#include "metrics.h"
#include "platform/platform.h"
#include "prepare.h"
#include "anthropic_reply.h"
#include "anthropic_request.h"
#include "responses.h"
#include "responses_request.h"
#include "session_pool.h"
#include "web_page.h"

namespace waste::server {
namespace {

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Events from the engine thread to a streaming connection's thread.
struct EventChannel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> events;
  bool finished = false;
  std::atomic<bool> cancel{false};

  bool Push(const std::string& e) {
    if (cancel.load()) return false;
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(e);
    }
    cv.notify_one();
    return true;
  }
  // Regardless of `cancel`: the server's own last words (shutting down).
  void PushAlways(const std::string& e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(e);
    }
    cv.notify_one();
  }
  void Finish() {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    cv.notify_one();
  }
};

// A blocking reply is generated on the engine thread while the
// connection's thread waits for it. cpp-httplib 0.11 tells a handler
// nothing about its connection (no socket on the Request, no accept hook;
// its is_writable() stays true after the peer closed), so after the first
// 10 ms the wait looks the connection's socket up once by its ports through
// the platform layer, then peeks at it every 10 ms; a peer that closed or
// reset sets `cancel`, which stops the generation at the next token (or
// prefill chunk) or drops the job before it runs if it is still queued.
// The reply of a client that stays is unchanged: same status, headers and
// Content-Length body. Where the socket cannot be found (another OS), the
// reply simply runs to its end.
GenerateResult AwaitBlocking(const httplib::Request& req, std::future<GenerateResult>& future,
                             std::atomic<bool>& cancel) {
  intptr_t sock = -1;
  bool looked = false;
  while (future.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
    if (!looked) {
      sock = platform::FindTcpSocket(req.local_port, req.remote_addr, req.remote_port);
      looked = true;
    }
    if (sock >= 0 && !cancel.load() && platform::SocketPeerClosed(sock)) cancel = true;
  }
  return future.get();
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  }
  return diff == 0 && !b.empty();
}

// "application/json", any case, parameters (charset) allowed.
bool IsJsonContentType(const std::string& value) {
  std::string type = value.substr(0, value.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  size_t a = type.find_first_not_of(" \t");
  type = a == std::string::npos ? "" : type.substr(a);
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type == "application/json";
}

std::string NormalizePath(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The Anthropic Messages routes answer errors in Anthropic's shape.
bool IsMessagesPath(const std::string& path) {
  const std::string p = NormalizePath(path);
  return p == "/v1/messages" || p == "/v1/messages/count_tokens";
}

// What Anthropic's clients ask (they send `anthropic-version` on every
// call) is answered in Anthropic's shapes: the Messages routes always, the
// model list when that header is there.
bool WantsAnthropicShape(const httplib::Request& req) {
  if (IsMessagesPath(req.path)) return true;
  const std::string p = NormalizePath(req.path);
  return req.has_header("anthropic-version") && (p == "/v1/models" || p.rfind("/v1/models/", 0) == 0);
}

// An error reply already written in OpenAI's shape (by the checks and
// paths every route shares) rewritten in Anthropic's
// (AnthropicErrorBody); the status and headers stay.
void ToAnthropicError(httplib::Response& res) {
  if (res.status < 400) return;
  Json body;
  std::string err;
  if (!ParseJson(res.body, &body, &err) || !body.is_object()) return;
  auto e = body.find("error");
  if (e == body.end() || !e->is_object()) return;
  ApiError api{res.status, e->value("type", std::string()), e->value("message", std::string()),
               std::nullopt, std::nullopt};
  if (auto p = e->find("param"); p != e->end() && p->is_string()) api.param = p->get<std::string>();
  if (auto c = e->find("code"); c != e->end() && c->is_string()) api.code = c->get<std::string>();
  res.set_content(Dump(AnthropicErrorBody(api), JsonStyle::kSpaced), "application/json");
}

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  ServeOptions options;
  ChatFormat format;
  ServeLimits limits;
  Metrics metrics;
  std::unique_ptr<SessionPool> pool;  // used by the worker threads (thread-safe)
  SessionPool::CacheReport cache_report;  // the prompt cache's last load or save
  std::unique_ptr<EngineWorker> worker;
  httplib::Server http;
  int64_t started_unix = UnixNow();
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  Impl(Engine& e, const ServeOptions& o) : engine(e), options(o) {}

  void Reply(httplib::Response& res, int status, const Json& body) {
    res.status = status;
    res.set_content(Dump(body, JsonStyle::kSpaced), "application/json");
  }
  void Fail(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(ErrorBody(e), "application/json");
  }

  Json ModelObject() const {
    const ModelInfo& info = engine.info();
    return {{"id", options.model_id},
            {"object", "model"},
            {"created", started_unix},
            {"owned_by", "waste"},
            {"waste",
             {{"n_layers", info.layers},
              {"n_experts", info.experts},
              {"top_k", info.top_k},
              {"hidden", info.hidden},
              {"ctx_max", info.ctx_tokens},
              {"params_total", info.params_total},
              {"params_active", info.params_active},
              {"arch", info.arch},
              {"quant_summary", info.quantization},
              {"chat_format", format.Name()},
              {"vision", format.vision.enabled}}}};  // images accepted (--vision)
  }

  void Get(const httplib::Request& req, httplib::Response& res) {
    std::string path = NormalizePath(req.path);
    if (path == "/") {
      res.set_content(std::string(ChatPageHtml()), "text/html; charset=utf-8");
    } else if (path == "/health") {
      double up = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      Reply(res, 200,
            {{"status", "ok"},
             {"model", options.model_id},
             {"engine", BuildInfo()},
             {"uptime_s", static_cast<int64_t>(up)}});
    } else if (path == "/v1/models") {
      if (WantsAnthropicShape(req)) {
        Reply(res, 200, AnthropicModelList(options.model_id, started_unix, engine.info().ctx_tokens));
      } else {
        Reply(res, 200, {{"object", "list"}, {"data", Json::array({ModelObject()})}});
      }
    } else if (path.rfind("/v1/models/", 0) == 0) {
      std::string id = path.substr(11);
      if (id == options.model_id) {
        Reply(res, 200, WantsAnthropicShape(req) ? AnthropicModel(id, started_unix, engine.info().ctx_tokens)
                                                            : ModelObject());
      } else {
        Fail(res, {404, "not_found_error", "no such model: " + id, "model", std::nullopt});
      }
    } else if (path == "/metrics") {
      res.set_content(metrics.Render(worker->waiting(), worker->running(), pool->store()),
                      "text/plain; version=0.0.4");
    } else {
      Fail(res, {404, "not_found_error", "no route for GET " + req.path, std::nullopt, std::nullopt});
    }
  }

  // §2.3 body checks; true when `body` holds a JSON object.
  bool ReadBody(const httplib::Request& req, httplib::Response& res, Json* body) {
    if (!req.has_header("Content-Length")) {
      res.set_header("Connection", "close");
      Fail(res, {411, "invalid_request_error", "Content-Length is required", std::nullopt,
                 std::nullopt});
      return false;
    }
    if (req.body.empty()) {
      Fail(res, BadRequest("request body is empty", std::nullopt));
      return false;
    }
    std::string err;
    bool too_wide = false;
    if (!ParseJson(req.body, body, &err, &too_wide)) {
      Fail(res, BadRequest((too_wide ? "request body refused: " : "request body is not valid JSON: ") + err,
                           std::nullopt));
      return false;
    }
    if (!body->is_object()) {
      Fail(res, BadRequest("request body must be a JSON object", std::nullopt));
      return false;
    }
    return true;
  }

  void Post(const httplib::Request& req, httplib::Response& res) {
    std::string path = NormalizePath(req.path);
    bool known = path == "/v1/chat/completions" || path == "/v1/completions" ||
                 path == "/v1/responses" || IsMessagesPath(path) || path == "/tokenize" ||
                 path == "/detokenize";
    if (!known) {
      Fail(res, {404, "not_found_error", "no route for POST " + req.path, std::nullopt, std::nullopt});
      return;
    }
    // A JSON body only: a cross-origin page can post text/plain or a form
    // without a preflight, never application/json.
    if (!IsJsonContentType(req.get_header_value("Content-Type"))) {
      res.set_header("Connection", "close");
      return Fail(res, {415, "invalid_request_error",
                        "Content-Type must be application/json (with curl: -H 'Content-Type: "
                        "application/json'; a form or text/plain post is what a web page could "
                        "send to this server unasked)",
                        std::nullopt,
                        "unsupported_media_type"});
    }
    Json body;
    if (!ReadBody(req, res, &body)) return;
    if (path == "/v1/chat/completions") Chat(req, body, res);
    else if (path == "/v1/completions") Completion(req, body, res);
    else if (path == "/v1/responses") Responses(req, body, res);
    else if (path == "/v1/messages") Messages(req, body, res);
    else if (path == "/v1/messages/count_tokens") CountMessageTokens(body, res);
    else if (path == "/tokenize") Tokenize(body, res);
    else Detokenize(body, res);
  }

  void Busy(httplib::Response& res) {
    if (stopping.load()) return Fail(res, ShuttingDown());
    metrics.CountRejected();
    res.set_header("Retry-After", "1");
    Fail(res, {503, "server_busy", "the request queue is full; retry shortly", std::nullopt,
               std::nullopt});
  }

  // A blocking request whose client left: nobody reads this answer.
  static void Abandoned(httplib::Response& res) {
    res.status = 499;  // "client closed request" (nginx's convention)
    res.set_header("Connection", "close");
  }

  // Shutdown (docs/SERVER.md, "Stopping"): queued requests are answered 503
  // at once, the running generations stop at their next token (or prefill
  // span) through their cancel flags, which each job registers while it runs.
  std::atomic<bool> stopping{false};
  std::mutex running_mu;
  std::set<std::shared_ptr<std::atomic<bool>>> running_cancels;

  static ApiError ShuttingDown() {
    return {503, "server_busy", "the server is shutting down", std::nullopt, "shutting_down"};
  }
  // On a worker thread, as a job starts: false when it must not run (its
  // client left while it was queued, or the server is stopping).
  bool Enter(const std::shared_ptr<std::atomic<bool>>& cancel) {
    std::lock_guard<std::mutex> lock(running_mu);
    running_cancels.insert(cancel);
    if (stopping.load()) *cancel = true;
    return !cancel->load();
  }
  void Leave(const std::shared_ptr<std::atomic<bool>>& cancel) {
    std::lock_guard<std::mutex> lock(running_mu);
    running_cancels.erase(cancel);
  }
  void Shutdown() {
    stopping = true;
    if (worker) worker->Shutdown();
    std::lock_guard<std::mutex> lock(running_mu);
    for (const auto& cancel : running_cancels) *cancel = true;
  }

  // After a chat reply was delivered, on its worker thread: prefill the
  // conversation's likely next turn on the reply's slot (session_pool.h,
  // "Follow-on prefill"), giving way at the next span boundary to any
  // request that waits or runs, and to shutdown.
  void FollowOn(std::shared_ptr<SessionPool::FollowOn> reserved,
                const std::function<std::vector<int>()>& next_turn) {
    if (!reserved || !next_turn) return;
    EngineWorker::Background background(*worker);
    auto give_way = [this] {
      return stopping.load() || worker->waiting() > 0 || worker->running() > 0;
    };
    if (give_way()) return;
    const std::vector<int> next = next_turn();
    if (next.empty()) return;
    metrics.CountFollowOn(pool->RunFollowOn(std::move(reserved), next, give_way));
  }

  // A blocking reply: `run` generates on the engine thread while this
  // connection's thread waits (AwaitBlocking).
  using BlockingRun = std::function<GenerateResult(Engine&, const std::atomic<bool>&)>;
  void Blocking(const httplib::Request& http_req, httplib::Response& res, BlockingRun run) {
    auto done = std::make_shared<std::promise<GenerateResult>>();
    auto future = done->get_future();
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    bool queued = worker->Submit(
        [this, run = std::move(run), done, cancel, submitted = std::chrono::steady_clock::now()](Engine& e) {
          GenerateResult r;
          if (Enter(cancel)) {
            const double queued_ms = MsSince(submitted);
            r = run(e, *cancel);
            r.queued_ms = queued_ms;
          } else {
            r.cancelled = true;  // left while queued (or stopping): nothing to run
          }
          Leave(cancel);
          metrics.CountGeneration(r, e.model().stats());
          std::shared_ptr<SessionPool::FollowOn> follow_on = std::move(r.follow_on);
          auto next_turn = std::move(r.next_turn);
          done->set_value(std::move(r));
          FollowOn(std::move(follow_on), next_turn);
        },
        [done] {
          GenerateResult r;
          r.error = ShuttingDown();
          done->set_value(std::move(r));
        });
    if (!queued) return Busy(res);
    GenerateResult r = AwaitBlocking(http_req, future, *cancel);
    if (r.cancelled && stopping.load()) return Fail(res, ShuttingDown());
    if (r.cancelled) return Abandoned(res);
    if (r.error) return Fail(res, *r.error);
    Reply(res, 200, r.body);
  }

  void Chat(const httplib::Request& http_req, const Json& body, httplib::Response& res) {
    auto chat = std::make_shared<PreparedChat>();
    if (auto e = PrepareChat(body, format, engine, limits, chat.get())) return Fail(res, *e);
    ReplyHeader header{NewResponseId("chatcmpl"), UnixNow(), options.model_id};
    if (!chat->stream) {
      return Blocking(http_req, res, [this, chat, header](Engine& e, const std::atomic<bool>& cancel) {
        return GenerateChat(e, *pool, *chat, format, header, nullptr, cancel);
      });
    }
    Stream(res, [this, chat, header](Engine& e, const EventSink& sink,
                                     const std::atomic<bool>& cancel) {
      return GenerateChat(e, *pool, *chat, format, header, sink, cancel);
    });
  }

  // /v1/responses: the chat path under the Responses API's names
  // (responses.h); a chat-side error names the chat field it checked, so
  // the names that differ are put back.
  void Responses(const httplib::Request& http_req, const Json& body, httplib::Response& res) {
    Json chat_body;
    if (auto e = ResponsesToChat(body, &chat_body)) return Fail(res, *e);
    auto chat = std::make_shared<PreparedChat>();
    if (auto e = PrepareChat(chat_body, format, engine, limits, chat.get())) {
      RenameChatFields(&*e);
      return Fail(res, *e);
    }
    chat->logprobs.message_text_only = true;  // output_text.logprobs: the message's tokens
    const ResponseHeader rh = NewResponseHeader(body, options.model_id, UnixNow());
    Translated(
        http_req, res, chat, [rh](const Json& chat_completion) { return ResponseFromChat(rh, chat_completion); },
        std::make_shared<ResponsesStream>(rh));
  }

  // A chat run answered in another API's shapes: blocking, the chat
  // completion through `reply`; streamed, the chat events through
  // `events` (Start(), OnChatEvent(), Unsent()). One translator serves the
  // run and a shutdown's last words, so those continue its numbering and
  // carry its items; the worker uses it in turn: the run, then (only after
  // it) the last words, or the last words alone when the request never ran.
  template <class Events>
  void Translated(const httplib::Request& http_req, httplib::Response& res,
                  std::shared_ptr<PreparedChat> chat, std::function<Json(const Json&)> reply,
                  std::shared_ptr<Events> events) {
    const ReplyHeader header{NewResponseId("chatcmpl"), UnixNow(), options.model_id};
    if (!chat->stream) {
      return Blocking(http_req, res, [this, chat, header, reply](Engine& e, const std::atomic<bool>& cancel) {
        GenerateResult r = GenerateChat(e, *pool, *chat, format, header, nullptr, cancel);
        if (!r.error && !r.cancelled) r.body = reply(r.body);
        return r;
      });
    }
    Stream(
        res,
        [this, chat, header, events](Engine& e, const EventSink& sink, const std::atomic<bool>& cancel) {
          auto send = [&](const std::vector<std::string>& out) {
            for (size_t i = 0; i < out.size(); ++i) {
              if (!sink(out[i])) {
                events->Unsent(out.size() - i);
                return false;
              }
            }
            return true;
          };
          send(events->Start());
          return GenerateChat(e, *pool, *chat, format, header,
                              [&](const std::string& ev) { return send(events->OnChatEvent(ev)); },
                              cancel);
        },
        [events] { return events->OnChatEvent("data: " + ErrorBody(ShuttingDown()) + "\n\n"); });
  }

  // /v1/messages: the chat path under Anthropic's Messages API
  // (anthropic_request.h, anthropic_reply.h). Errors are put in its shape
  // where the request is routed (Post, PreRoute).
  void Messages(const httplib::Request& http_req, const Json& body, httplib::Response& res) {
    Json chat_body;
    auto chat = std::make_shared<PreparedChat>();
    if (auto e = MessagesToChat(body, &chat_body)) return Fail(res, *e);
    if (auto e = PrepareChat(chat_body, format, engine, limits, chat.get())) {
      RenameChatFieldsForMessages(&*e);
      return Fail(res, *e);
    }
    chat->report_stop_string = true;  // stop_sequence
    const MessagesHeader mh = NewMessagesHeader(options.model_id, chat->prompt_tokens);
    Translated(
        http_req, res, chat, [mh](const Json& chat_completion) { return MessageFromChat(mh, chat_completion); },
        std::make_shared<MessagesStream>(mh));
  }

  // /v1/messages/count_tokens: the prompt a Messages request would read,
  // counted as /v1/messages counts it (images by their rows); nothing runs.
  void CountMessageTokens(const Json& body, httplib::Response& res) {
    Json request = body;
    if (!Field(request, "max_tokens")) request["max_tokens"] = 1;  // not part of this call
    request.erase("stream");
    Json chat_body;
    PreparedChat chat;
    if (auto e = MessagesToChat(request, &chat_body)) return Fail(res, *e);
    if (auto e = PrepareChat(chat_body, format, engine, limits, &chat)) {
      RenameChatFieldsForMessages(&*e);
      return Fail(res, *e);
    }
    Reply(res, 200, {{"input_tokens", chat.prompt_tokens}});
  }

  // A streamed reply: `run` generates on the engine thread, pushing SSE
  // events into a channel this connection's thread writes out. On shutdown
  // the stream ends with what `shutdown_events` gives (unset: a chat
  // stream's error event and [DONE]).
  using StreamRun = std::function<GenerateResult(Engine&, const EventSink&, const std::atomic<bool>&)>;
  using ShutdownEvents = std::function<std::vector<std::string>()>;
  void Stream(httplib::Response& res, StreamRun run, ShutdownEvents shutdown_events = {}) {
    auto channel = std::make_shared<EventChannel>();
    if (!shutdown_events) {
      shutdown_events = [] {
        return std::vector<std::string>{"data: " + ErrorBody(ShuttingDown()) + "\n\n",
                                        "data: [DONE]\n\n"};
      };
    }
    auto last_words = [channel, shutdown_events] {
      for (const std::string& ev : shutdown_events()) channel->PushAlways(ev);
    };
    bool queued = worker->Submit(
        [this, run = std::move(run), channel, last_words,
         submitted = std::chrono::steady_clock::now()](Engine& e) {
          std::shared_ptr<std::atomic<bool>> cancel(channel, &channel->cancel);
          std::shared_ptr<SessionPool::FollowOn> follow_on;
          std::function<std::vector<int>()> next_turn;
          if (Enter(cancel)) {
            const double queued_ms = MsSince(submitted);
            GenerateResult r = run(e, [&](const std::string& ev) { return channel->Push(ev); },
                                   channel->cancel);
            r.queued_ms = queued_ms;
            metrics.CountGeneration(r, e.model().stats());
            if (r.cancelled && stopping.load()) last_words();
            follow_on = std::move(r.follow_on);
            next_turn = std::move(r.next_turn);
          } else if (stopping.load()) {
            last_words();
          }
          Leave(cancel);
          channel->Finish();
          FollowOn(std::move(follow_on), next_turn);
        },
        [channel, last_words] {
          last_words();
          channel->Finish();
        });
    if (!queued) return Busy(res);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [channel](size_t, httplib::DataSink& sink) {
          std::unique_lock<std::mutex> lock(channel->mu);
          while (true) {
            while (!channel->events.empty()) {
              std::string ev = std::move(channel->events.front());
              channel->events.pop_front();
              lock.unlock();
              bool ok = sink.write(ev.data(), ev.size());
              lock.lock();
              if (!ok) {
                channel->cancel = true;
                return false;
              }
            }
            if (channel->finished) {
              lock.unlock();
              sink.done();
              return true;
            }
            channel->cv.wait_for(lock, std::chrono::milliseconds(100));
            if (channel->events.empty() && !channel->finished && !sink.is_writable()) {
              channel->cancel = true;  // the client went away while waiting
              return false;
            }
          }
        },
        [channel](bool) { channel->cancel = true; });
  }

  void Completion(const httplib::Request& http_req, const Json& body, httplib::Response& res) {
    auto req = std::make_shared<PreparedCompletion>();
    if (auto e = PrepareCompletion(body, format, engine, limits, req.get())) return Fail(res, *e);
    ReplyHeader header{NewResponseId("cmpl"), UnixNow(), options.model_id};
    if (req->stream) {
      return Stream(res, [this, req, header](Engine& e, const EventSink& sink,
                                             const std::atomic<bool>& cancel) {
        return GenerateCompletion(e, *pool, *req, format, header, sink, cancel);
      });
    }
    Blocking(http_req, res, [this, req, header](Engine& e, const std::atomic<bool>& cancel) {
      return GenerateCompletion(e, *pool, *req, format, header, nullptr, cancel);
    });
  }

  void Tokenize(const Json& body, httplib::Response& res) {
    auto content = body.find("content");
    if (content == body.end() || !content->is_string()) {
      return Fail(res, BadRequest("'content' must be a string", "content"));
    }
    bool markup = false;
    if (auto m = body.find("markup"); m != body.end() && !m->is_null()) {
      if (!m->is_boolean()) return Fail(res, BadRequest("'markup' must be a boolean", "markup"));
      markup = m->get<bool>();
    }
    auto ids = engine.Tokenize(content->get<std::string>(), markup, false);
    if (!ids) {
      return Fail(res, {500, "engine_error", "tokenize: " + ids.error().ToString(), std::nullopt,
                        std::nullopt});
    }
    Reply(res, 200, {{"tokens", *ids}});
  }

  void Detokenize(const Json& body, httplib::Response& res) {
    auto tokens = body.find("tokens");
    const char* msg = "'tokens' must be an array of token ids";
    if (tokens == body.end() || !tokens->is_array()) return Fail(res, BadRequest(msg, "tokens"));
    std::vector<int> ids;
    for (const Json& t : *tokens) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= engine.info().vocab) {
        return Fail(res, BadRequest(msg + std::string(" below the vocabulary size"), "tokens"));
      }
      ids.push_back(t.get<int>());
    }
    auto text = engine.Detokenize(ids);
    if (!text) {
      return Fail(res, {500, "engine_error", "detokenize: " + text.error().ToString(),
                        std::nullopt, std::nullopt});
    }
    Reply(res, 200, {{"content", SanitizeUtf8(*text)}});
  }

  // Before the body is read: a Content-Length that is not a decimal count
  // (negative, say, which the HTTP library would read as 2^64 - n and
  // answer 413) is a 400.
  httplib::Server::HandlerResponse CheckContentLength(const httplib::Request& req,
                                                      httplib::Response& res) {
    if (!req.has_header("Content-Length")) return httplib::Server::HandlerResponse::Unhandled;
    std::string v = req.get_header_value("Content-Length");
    bool digits = !v.empty() && v.size() <= 19 &&
                  std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("Connection", "close");
    Fail(res, BadRequest("Content-Length must be a non-negative decimal integer", std::nullopt));
    return httplib::Server::HandlerResponse::Handled;
  }

  // Authentication runs before routing and before a POST body is read.
  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res) {
    if (!options.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", options.cors_origin);
      if (req.method == "OPTIONS") {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        // Echo what the browser asks for (the openai JS SDK sends
        // x-stainless-* headers); the origin check is what guards.
        std::string asked = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers",
                       asked.empty() ? std::string("Authorization, Content-Type") : asked);
        res.set_header("Vary", "Origin, Access-Control-Request-Headers");
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    bool open = options.api_key.empty() ||
                (req.method == "GET" && NormalizePath(req.path) == "/health");
    if (open) return CheckContentLength(req, res);
    // OpenAI clients send the key as a bearer token, Anthropic's as x-api-key.
    std::string auth = req.get_header_value("Authorization");
    bool ok = (auth.rfind("Bearer ", 0) == 0 && ConstantTimeEquals(auth.substr(7), options.api_key)) ||
              (req.has_header("x-api-key") &&
               ConstantTimeEquals(req.get_header_value("x-api-key"), options.api_key));
    if (ok) return CheckContentLength(req, res);
    if (req.method == "POST") res.set_header("Connection", "close");
    Fail(res, {401, "authentication_error", "invalid API key", std::nullopt, "invalid_api_key"});
    if (WantsAnthropicShape(req)) ToAnthropicError(res);
    return httplib::Server::HandlerResponse::Handled;
  }

  void Setup() {
    http.set_default_headers({{"Server", std::string("waste/") + WASTE_VERSION_STRING}});
    http.set_payload_max_length(options.body_limit);
    int threads = std::max(2, options.http_threads);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    http.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return PreRoute(req, res); });
    http.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        Get(req, res);
      } catch (const std::exception& e) {
        Fail(res, {500, "server_error", e.what(), std::nullopt, std::nullopt});
      }
      if (WantsAnthropicShape(req)) ToAnthropicError(res);
    });
    http.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        Post(req, res);
      } catch (const std::exception& e) {
        Fail(res, {500, "server_error", e.what(), std::nullopt, std::nullopt});
      }
      if (WantsAnthropicShape(req)) ToAnthropicError(res);
    });
    // Statuses httplib decides itself (413 past the body limit, 400 on a
    // malformed request) still get an OpenAI-shaped body.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413) {
        res.set_header("Connection", "close");
        Fail(res, BadRequest("request body may not exceed " + std::to_string(options.body_limit) +
                                 " bytes",
                             std::nullopt));
        res.status = 413;
      } else if (res.status == 404) {
        Fail(res, {404, "not_found_error", "no route for " + req.method + " " + req.path,
                   std::nullopt, std::nullopt});
      } else {
        int status = res.status;
        Fail(res, BadRequest("malformed request", std::nullopt));
        res.status = status;
      }
      if (WantsAnthropicShape(req)) ToAnthropicError(res);
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.CountRequest(NormalizePath(req.path), res.status);
      std::fprintf(stderr, "%s \"%s %s\" %d\n", req.remote_addr.c_str(), req.method.c_str(),
                   req.path.c_str(), res.status);
    });
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() {
  Stop();
  // A job whose stream's client left is still running: it uses Impl's
  // members (metrics, the cancel set, the pool) until it ends.
  if (impl_ && impl_->worker) impl_->worker->Join();
}

int RewindMarksFor(const ServeOptions& options) {
  return (options.follow_on ? SessionPool::kMarks : 1) + std::max(0, options.earlier_points);
}

Result<std::unique_ptr<HttpServer>> HttpServer::Create(Engine& engine, const ServeOptions& options) {
  auto impl = std::make_unique<Impl>(engine, options);
  impl->format = ResolveChatFormat(engine, options.no_thinking);
  impl->format.default_thinking_budget = options.reasoning_budget;
  if (options.vision) {
    if (!engine.has_vision()) {
      return UnsupportedError("--vision: this container has no vision tower (or it was opened without vision)");
    }
    if (impl->format.kind != ChatFormat::Kind::kXtml) {
      return UnsupportedError("--vision: images need the K3 chat format (XTML markers in the tokenizer)");
    }
    impl->format.vision.enabled = true;
    impl->format.vision.allow_local_paths = options.allow_local_images;
  }
  impl->limits.ctx_max = engine.info().ctx_tokens;
  impl->limits.default_max_tokens = options.default_max_tokens;
  auto pool = SessionPool::Create(engine, std::max(1, options.parallel), options.follow_on,
                                  options.earlier_points);
  if (!pool) return pool.error();
  impl->pool = std::move(*pool);
  if (!options.prompt_cache_dir.empty()) {
    impl->cache_report = impl->pool->LoadMarks(options.prompt_cache_dir);
    if (options.prompt_cache_bytes > 0) {
      PointStore::Options so;
      so.dir = options.prompt_cache_dir;
      so.max_bytes = options.prompt_cache_bytes;
      so.vocab = engine.info().vocab;
      so.ctx = engine.info().ctx_tokens;
      Result<std::unique_ptr<PointStore>> store = PointStore::Open(so);
      if (store) {
        impl->pool->UseStore(std::move(*store));
      } else {
        // The server runs without spilled points, as without the option.
        impl->cache_report.skipped.push_back("stored points: " + store.error().message());
      }
    }
  }
  // One worker per slot: that many requests run at once, sharing the model
  // a step at a time (server/engine_worker.h).
  impl->worker = std::make_unique<EngineWorker>(engine, static_cast<size_t>(impl->pool->slots()),
                                                static_cast<size_t>(std::max(0, options.queue)));
  impl->Setup();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

Result<int> HttpServer::Bind() {
  Impl& m = *impl_;
  int port = m.options.port;
  if (port == 0) {
    port = m.http.bind_to_any_port(m.options.host.c_str());
    if (port < 0) return IoError("cannot bind " + m.options.host);
  } else if (!m.http.bind_to_port(m.options.host.c_str(), port)) {
    return IoError("cannot bind " + m.options.host + ":" + std::to_string(port));
  }
  return port;
}

Status HttpServer::Serve() {
  if (!impl_->http.listen_after_bind()) return IoError("the listener failed");
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_) return;
  impl_->Shutdown();
  impl_->http.stop();
}

namespace {
// "restored 2 conversations (384 prompt tokens) from DIR".
std::string CacheLine(const char* done, const SessionPool::CacheReport& r, const char* where,
                      const std::string& dir) {
  return std::string(done) + " " + std::to_string(r.conversations) + " conversation" +
         (r.conversations == 1 ? "" : "s") + " (" + std::to_string(r.tokens) + " prompt tokens) " +
         where + " " + dir;
}
}  // namespace

std::string HttpServer::PromptCacheDescription() const {
  const std::string& dir = impl_->options.prompt_cache_dir;
  if (dir.empty()) return {};
  std::string line = CacheLine("restored", impl_->cache_report, "from", dir);
  if (const PointStore* store = impl_->pool->store()) {
    const PointStore::Counts c = store->counts();
    line += "; " + std::to_string(c.points) + " stored point" + (c.points == 1 ? "" : "s") + " (" +
            std::to_string(c.bytes >> 20) + " MiB of up to " +
            std::to_string(impl_->options.prompt_cache_bytes >> 20) + " MiB)";
  }
  return line;
}

const std::vector<std::string>& HttpServer::prompt_cache_skipped() const {
  return impl_->cache_report.skipped;
}

std::string HttpServer::SavePromptCache() {
  Impl& m = *impl_;
  if (m.options.prompt_cache_dir.empty()) return {};
  m.Shutdown();
  m.worker->Join();  // no request runs after this
  m.cache_report = m.pool->SaveMarks(m.options.prompt_cache_dir);
  return CacheLine("saved", m.cache_report, "to", m.options.prompt_cache_dir);
}

std::string HttpServer::FormatDescription() const {
  const ChatFormat& f = impl_->format;
  switch (f.kind) {
    case ChatFormat::Kind::kXtml:
      return std::string("chat format XTML, thinking ") + (f.default_thinking ? "on" : "off") +
             " by default";
    case ChatFormat::Kind::kChatJson: {
      const std::string source =
          f.tmpl.stock_name.empty()
              ? "chat.json"
              : f.tmpl.stock_name + " (built in: no chat.json, the tokenizer has its markers)";
      if (f.tmpl.think_open.empty() && !f.kimi_tools.ok()) {
        return "chat format " + source + ": plain conversation only (no tools, no reasoning)";
      }
      return "chat format " + source + ": conversation, " +
             (f.tmpl.think_open.empty() ? "no reasoning" : f.tmpl.think_open + " reasoning") +
             ", " + (f.kimi_tools.ok() ? "Kimi tool calls" : "no tools");
    }
    default:
      return "no chat format (" + f.none_reason + "): /v1/chat/completions is refused";
  }
}

}  // namespace waste::server
