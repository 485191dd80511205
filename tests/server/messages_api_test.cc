// /v1/messages (docs/SERVER.md, "The Anthropic Messages API"): the chat
// path under Anthropic's names. The same prompt gives the chat reply's text
// and reasoning as content blocks; a stream's events rebuild the blocking
// message; stop sequences, forced tool calls and their round trip work;
// count_tokens counts what the request would read; errors come in
// Anthropic's shape, and x-api-key is a key like a bearer token.
#include <gtest/gtest.h>

#include <httplib.h>

#include <cctype>
#include <string>
#include <vector>

#include "http_test_util.h"

namespace waste::server {
namespace {

using testing::ParseBody;
using testing::ParseSse;
using testing::Running;
using testing::TinyEngine;

class MessagesApi : public ::testing::Test {
 protected:
  static std::pair<int, Json> Post(httplib::Client& c, const char* path, const Json& req) {
    return testing::PostJson(c, path, req);
  }
  // The text of a message's text blocks, and of its thinking blocks.
  static std::string Blocks(const Json& message, const char* type, const char* field) {
    std::string out;
    for (const Json& b : message["content"]) {
      if (b["type"] == type) out += b[field].get<std::string>();
    }
    return out;
  }
};

TEST_F(MessagesApi, ServesTheChatPath) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  for (const bool thinking : {false, true}) {
    SCOPED_TRACE(thinking ? "thinking" : "no thinking");
    auto [cs, chat] = Post(c, "/v1/chat/completions",
                           {{"messages", Json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                      {{"role", "user"}, {"content", "Hello"}}})},
                            {"max_tokens", 12}, {"thinking", thinking}});
    ASSERT_EQ(cs, 200) << chat.dump();
    const Json& reply = chat["choices"][0]["message"];
    const Json req = {{"model", "tiny"},
                      {"max_tokens", 12},
                      {"system", Json::array({{{"type", "text"}, {"text", "Be brief."}}})},
                      {"messages", Json::array({{{"role", "user"}, {"content", "Hello"}}})},
                      {"thinking", {{"type", thinking ? "enabled" : "disabled"}, {"budget_tokens", 1024}}}};
    auto [ms, msg] = Post(c, "/v1/messages", req);
    ASSERT_EQ(ms, 200) << msg.dump();
    EXPECT_EQ(msg["type"], "message");
    EXPECT_EQ(msg["role"], "assistant");
    EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
    EXPECT_EQ(Blocks(msg, "text", "text"), reply["content"].is_string() ? reply["content"].get<std::string>() : "");
    EXPECT_EQ(Blocks(msg, "thinking", "thinking"), reply.value("reasoning_content", std::string()));
    EXPECT_EQ(thinking, reply.contains("reasoning_content"));
    EXPECT_EQ(msg["stop_reason"], chat["choices"][0]["finish_reason"] == "length" ? "max_tokens" : "end_turn");
    EXPECT_TRUE(msg["stop_sequence"].is_null());
    // Usage: the prompt read plus the prompt resumed from a restore point
    // (at multiples of 128 tokens: none in so short a prompt) is the chat prompt.
    const Json& u = msg["usage"];
    EXPECT_EQ(u["input_tokens"].get<int>() + u["cache_read_input_tokens"].get<int>(),
              chat["usage"]["prompt_tokens"].get<int>());
    EXPECT_EQ(u["output_tokens"], chat["usage"]["completion_tokens"]);

    // count_tokens: the same prompt, nothing run.
    Json count_req = req;
    count_req.erase("max_tokens");
    auto [ts, count] = Post(c, "/v1/messages/count_tokens", count_req);
    ASSERT_EQ(ts, 200) << count.dump();
    EXPECT_EQ(count, Json({{"input_tokens", chat["usage"]["prompt_tokens"]}}));

    // Streamed: the events in Anthropic's order rebuild the blocking message.
    Json stream_req = req;
    stream_req["stream"] = true;
    auto st = c.Post("/v1/messages", Dump(stream_req, JsonStyle::kSpaced), "application/json");
    ASSERT_TRUE(st);
    ASSERT_EQ(st->status, 200);
    EXPECT_EQ(st->get_header_value("Content-Type"), "text/event-stream");
    const std::vector<Json> events = ParseSse(st->body);
    ASSERT_GE(events.size(), 3u) << st->body;
    EXPECT_EQ(events.front()["type"], "message_start");
    EXPECT_EQ(events.front()["message"]["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
    EXPECT_EQ(events.back()["type"], "message_stop");
    Json blocks = Json::array();
    int open = -1;
    for (const Json& ev : events) {
      EXPECT_NE(st->body.find("event: " + ev["type"].get<std::string>() + "\ndata: "), std::string::npos);
      if (ev["type"] == "content_block_start") {
        EXPECT_EQ(open, -1) << "one block at a time";
        open = ev["index"];
        EXPECT_EQ(open, static_cast<int>(blocks.size()));
        blocks.push_back(ev["content_block"]);
      } else if (ev["type"] == "content_block_delta") {
        ASSERT_EQ(ev["index"], open);
        const Json& d = ev["delta"];
        Json& b = blocks[static_cast<size_t>(open)];
        if (d["type"] == "text_delta") b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
        if (d["type"] == "thinking_delta") {
          b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
        }
      } else if (ev["type"] == "content_block_stop") {
        EXPECT_EQ(ev["index"], open);
        open = -1;
      } else if (ev["type"] == "message_delta") {
        EXPECT_EQ(ev["delta"]["stop_reason"], msg["stop_reason"]);
        EXPECT_EQ(ev["usage"]["output_tokens"], u["output_tokens"]);
      }
    }
    EXPECT_EQ(blocks, msg["content"]);
  }
}

TEST_F(MessagesApi, StopSequencesAndToolCalls) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  const Json hello = Json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto [ps, plain] = Post(c, "/v1/messages", {{"max_tokens", 16}, {"messages", hello},
                                             {"thinking", {{"type", "disabled"}}}});
  ASSERT_EQ(ps, 200);
  const std::string text = Blocks(plain, "text", "text");
  // Two printable characters from inside the reply as the stop sequence.
  size_t at = 1;
  while (at + 1 < text.size() && !(std::isprint(static_cast<unsigned char>(text[at])) &&
                                   std::isprint(static_cast<unsigned char>(text[at + 1])))) {
    ++at;
  }
  ASSERT_LT(at + 1, text.size()) << "no two printable characters in: " << text;
  const std::string stop = text.substr(at, 2);
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "blocking");
    Json req = {{"max_tokens", 16}, {"messages", hello}, {"thinking", {{"type", "disabled"}}},
                {"stop_sequences", Json::array({"never appears", stop})}, {"stream", stream}};
    auto r = c.Post("/v1/messages", Dump(req, JsonStyle::kSpaced), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    Json stop_reason, stop_sequence;
    if (stream) {
      for (const Json& ev : ParseSse(r->body)) {
        if (ev["type"] == "message_delta") {
          stop_reason = ev["delta"]["stop_reason"];
          stop_sequence = ev["delta"]["stop_sequence"];
        }
      }
    } else {
      const Json m = ParseBody(r->body);
      EXPECT_EQ(Blocks(m, "text", "text"), text.substr(0, text.find(stop)));
      stop_reason = m["stop_reason"];
      stop_sequence = m["stop_sequence"];
    }
    EXPECT_EQ(stop_reason, "stop_sequence");
    EXPECT_EQ(stop_sequence, stop);
  }

  // A forced call: a tool_use block whose input follows the schema; and its
  // round trip, the call and its result as content blocks.
  const Json tools = Json::array({{{"name", "get_weather"}, {"description", "Weather"},
                                   {"input_schema", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}}}}},
                                                     {"required", Json::array({"city"})}}}}});
  const Json ask = Json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  auto [fs, forced] = Post(c, "/v1/messages", {{"max_tokens", 160}, {"messages", ask}, {"tools", tools},
                                              {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}});
  ASSERT_EQ(fs, 200) << forced.dump();
  EXPECT_EQ(forced["stop_reason"], "tool_use");
  Json use;
  for (const Json& b : forced["content"]) {
    if (b["type"] == "tool_use") use = b;
  }
  ASSERT_TRUE(use.is_object()) << forced.dump();
  EXPECT_EQ(use["name"], "get_weather");
  ASSERT_TRUE(use["input"].is_object());
  EXPECT_TRUE(use["input"]["city"].is_string()) << use.dump();
  Json round = ask;
  round.push_back({{"role", "assistant"}, {"content", forced["content"]}});
  round.push_back({{"role", "user"},
                   {"content", Json::array({{{"type", "tool_result"}, {"tool_use_id", use["id"]},
                                             {"content", "18C, sunny"}},
                                            {{"type", "text"}, {"text", "And tomorrow?"}}})}});
  auto [rs, answer] = Post(c, "/v1/messages", {{"max_tokens", 8}, {"messages", round}, {"tools", tools}});
  EXPECT_EQ(rs, 200) << answer.dump();
  // The round trip's prompt holds the call and its result: longer than the question alone.
  auto [cs1, alone] = Post(c, "/v1/messages/count_tokens", {{"messages", ask}, {"tools", tools}});
  auto [cs2, whole] = Post(c, "/v1/messages/count_tokens", {{"messages", round}, {"tools", tools}});
  EXPECT_GT(whole["input_tokens"].get<int>(), alone["input_tokens"].get<int>() + 8);

  // Streamed, the call is a tool_use block with its input as one JSON delta.
  auto st = c.Post("/v1/messages",
                   Dump({{"max_tokens", 160}, {"messages", ask}, {"tools", tools}, {"stream", true},
                         {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}},
                        JsonStyle::kSpaced),
                   "application/json");
  ASSERT_TRUE(st);
  std::string partial;
  Json started;
  for (const Json& ev : ParseSse(st->body)) {
    if (ev["type"] == "content_block_start" && ev["content_block"]["type"] == "tool_use") started = ev["content_block"];
    if (ev["type"] == "content_block_delta" && ev["delta"]["type"] == "input_json_delta") {
      partial += ev["delta"]["partial_json"].get<std::string>();
    }
  }
  ASSERT_TRUE(started.is_object()) << st->body;
  EXPECT_EQ(started["name"], "get_weather");
  EXPECT_EQ(ParseBody(partial), use["input"]);
}

// A prefill: a last assistant message is continued, on chat with
// continue_final_message and on Messages by Anthropic's rule. Greedy, the
// continuation of the reply's first tokens is the rest of the reply.
TEST_F(MessagesApi, APrefillIsContinued) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  const Json hello = Json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto [fs, full] = Post(c, "/v1/chat/completions", {{"messages", hello}, {"max_tokens", 12},
                                                     {"thinking", false}, {"logprobs", true}});
  ASSERT_EQ(fs, 200);
  const Json& tokens = full["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(tokens.size(), 12u);
  std::string head, text = full["choices"][0]["message"]["content"];
  for (int i = 0; i < 3; ++i) {
    for (const Json& b : tokens[i]["bytes"]) head += static_cast<char>(b.get<int>());
  }
  ASSERT_EQ(text.rfind(head, 0), 0u) << "the first tokens are plain text: " << text;
  Json prefilled = hello;
  prefilled.push_back({{"role", "assistant"}, {"content", head}});
  auto [cs, chat] = Post(c, "/v1/chat/completions", {{"messages", prefilled}, {"max_tokens", 9},
                                                     {"thinking", false}, {"continue_final_message", true}});
  ASSERT_EQ(cs, 200) << chat.dump();
  EXPECT_EQ(chat["choices"][0]["message"]["content"], text.substr(head.size()));
  EXPECT_EQ(chat["usage"]["prompt_tokens"].get<int>(), full["usage"]["prompt_tokens"].get<int>() + 3);
  auto [ms, msg] = Post(c, "/v1/messages", {{"messages", prefilled}, {"max_tokens", 9},
                                            {"thinking", {{"type", "disabled"}}}});
  ASSERT_EQ(ms, 200) << msg.dump();
  EXPECT_EQ(Blocks(msg, "text", "text"), text.substr(head.size()));
  // A prefill that calls a tool is no prefill: said naming the messages.
  Json with_call = hello;
  with_call.push_back({{"role", "assistant"},
                       {"content", Json::array({{{"type", "tool_use"}, {"id", "t1"}, {"name", "f"},
                                                 {"input", Json::object()}}})}});
  auto [bs, bad] = Post(c, "/v1/messages", {{"messages", with_call}, {"max_tokens", 4},
                                            {"tools", Json::array({{{"name", "f"}, {"input_schema", {{"type", "object"}}}}})}});
  EXPECT_EQ(bs, 400);
  EXPECT_EQ(bad["error"]["param"], "messages") << bad.dump();
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("prefill"), std::string::npos) << bad.dump();
}

TEST_F(MessagesApi, ErrorsInAnthropicsShapeAndTheKeyHeader) {
  ServeOptions o;
  o.api_key = "secret";
  Running s(o);
  httplib::Client c = s.Client();
  const Json ok = {{"max_tokens", 2}, {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})}};
  for (const auto& [headers, status] :
       std::vector<std::pair<httplib::Headers, int>>{{{{"x-api-key", "secret"}}, 200},
                                                     {{{"Authorization", "Bearer secret"}}, 200},
                                                     {{{"x-api-key", "wrong"}}, 401},
                                                     {{}, 401}}) {
    auto r = c.Post("/v1/messages", headers, Dump(ok, JsonStyle::kSpaced), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status);
    if (status == 401) {
      EXPECT_EQ(ParseBody(r->body)["type"], "error");
      EXPECT_EQ(ParseBody(r->body)["error"]["type"], "authentication_error") << r->body;
    }
  }
  c.set_default_headers({{"x-api-key", "secret"}});
  // What cannot be served names the Messages field, in Anthropic's shape.
  const std::pair<Json, const char*> refused[] = {
      {{{"messages", ok["messages"]}}, "max_tokens"},
      {{{"max_tokens", 0}, {"messages", ok["messages"]}}, "max_tokens"},
      {{{"max_tokens", 2}}, "messages"},
      {{{"max_tokens", 2}, {"messages", Json::array()}}, "messages"},
      {{{"max_tokens", 2}, {"messages", Json::array({{{"role", "system"}, {"content", "x"}}})}}, "messages[0].role"},
      {{{"max_tokens", 2},
        {"messages", Json::array({{{"role", "user"},
                                   {"content", Json::array({{{"type", "document"}, {"source", Json::object()}}})}}})}},
       "messages[0].content[0].type"},
      {{{"max_tokens", 2},
        {"messages", Json::array({{{"role", "user"},
                                   {"content", Json::array({{{"type", "image"},
                                                             {"source", {{"type", "file"}, {"file_id", "f"}}}}})}}})}},
       "messages[0].content[0].source.type"},
      {{{"max_tokens", 2}, {"messages", ok["messages"]}, {"tools", Json::array({{{"type", "bash_20250124"}, {"name", "bash"}}})}},
       "tools[0].type"},
      {{{"max_tokens", 2}, {"messages", ok["messages"]}, {"tools", Json::array({{{"name", "f"}}})}}, "tools[0].input_schema"},
      {{{"max_tokens", 2}, {"messages", ok["messages"]}, {"tool_choice", {{"type", "sometimes"}}}}, "tool_choice.type"},
      {{{"max_tokens", 2}, {"messages", ok["messages"]}, {"thinking", {{"type", "maybe"}}}}, "thinking.type"},
      {{{"max_tokens", 2}, {"messages", ok["messages"]}, {"stop_sequences", "x"}}, "stop_sequences"},
      {{{"max_tokens", 2}, {"messages", ok["messages"]}, {"stop_sequences", Json::array({1})}}, "stop_sequences"},
      {{{"max_tokens", 2}, {"messages", ok["messages"]}, {"temperature", "hot"}}, "temperature"},
      {{{"max_tokens", 2}, {"messages", ok["messages"]}, {"mcp_servers", Json::array()}}, "mcp_servers"}};
  for (const auto& [body, param] : refused) {
    auto [status, reply] = Post(c, "/v1/messages", body);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_EQ(reply["type"], "error") << reply.dump();
    EXPECT_EQ(reply["error"]["type"], "invalid_request_error") << reply.dump();
    EXPECT_EQ(reply["error"]["param"], param) << reply.dump();
    EXPECT_FALSE(reply["error"]["message"].get<std::string>().empty());
  }
  // The checks every route shares answer in this route's shape too.
  auto text = c.Post("/v1/messages", "{}", "text/plain");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 415);
  EXPECT_EQ(ParseBody(text->body)["error"]["type"], "invalid_request_error") << text->body;
  auto broken = c.Post("/v1/messages", "{not json", "application/json");
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->status, 400);
  EXPECT_EQ(ParseBody(broken->body)["type"], "error") << broken->body;
  // ... and the OpenAI routes keep OpenAI's.
  auto chat = c.Post("/v1/chat/completions", "{}", "application/json");
  ASSERT_TRUE(chat);
  EXPECT_FALSE(ParseBody(chat->body).contains("type")) << chat->body;
  EXPECT_TRUE(ParseBody(chat->body)["error"].contains("code")) << chat->body;
}

// What the current SDK sends beyond the first Messages API: adaptive
// thinking (thinking on, the model's own length), output_config.effort (the
// chat route's reasoning_effort) and output_config.format (structured
// outputs: the reply is the JSON the schema asks for).
TEST_F(MessagesApi, AdaptiveThinkingEffortAndStructuredOutput) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  const Json hello = Json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto [es, enabled] = Post(c, "/v1/messages",
                            {{"max_tokens", 12}, {"messages", hello}, {"thinking", {{"type", "enabled"}}}});
  ASSERT_EQ(es, 200) << enabled.dump();
  auto [as, adaptive] = Post(c, "/v1/messages",
                             {{"max_tokens", 12}, {"messages", hello},
                              {"thinking", {{"type", "adaptive"}, {"display", "summarized"}}}});
  ASSERT_EQ(as, 200) << adaptive.dump();
  EXPECT_EQ(adaptive["content"], enabled["content"]);
  // The effort is K3's thinking-effort note: the same prompt as the chat
  // route's reasoning_effort (the count says so).
  auto [cs, counted] = Post(c, "/v1/messages/count_tokens",
                            {{"messages", hello}, {"thinking", {{"type", "adaptive"}}},
                             {"output_config", {{"effort", "high"}}}});
  ASSERT_EQ(cs, 200) << counted.dump();
  auto [ps, plain_count] = Post(c, "/v1/messages/count_tokens",
                                {{"messages", hello}, {"thinking", {{"type", "adaptive"}}}});
  ASSERT_EQ(ps, 200);
  EXPECT_GT(counted["input_tokens"].get<int>(), plain_count["input_tokens"].get<int>());
  auto [xs, xhigh] = Post(c, "/v1/messages/count_tokens",
                          {{"messages", hello}, {"output_config", {{"effort", "xhigh"}}}});
  auto [ms, max] = Post(c, "/v1/messages/count_tokens",
                        {{"messages", hello}, {"output_config", {{"effort", "max"}}}});
  EXPECT_EQ(xhigh, max);
  // Structured output.
  const Json schema = {{"type", "object"},
                       {"properties", {{"n", {{"type", "integer"}, {"minimum", 1}, {"maximum", 9}}}}},
                       {"required", {"n"}},
                       {"additionalProperties", false}};
  auto [fs, formatted] = Post(c, "/v1/messages",
                              {{"max_tokens", 60}, {"messages", hello}, {"thinking", {{"type", "disabled"}}},
                               {"output_config", {{"format", {{"type", "json_schema"}, {"schema", schema}}}}}});
  ASSERT_EQ(fs, 200) << formatted.dump();
  std::string text = Blocks(formatted, "text", "text");
  Json parsed = ParseBody(text);
  ASSERT_TRUE(parsed.is_object()) << text;
  EXPECT_GE(parsed["n"].get<int>(), 1);
  EXPECT_LE(parsed["n"].get<int>(), 9);
  // Bad values name the Messages field.
  const std::pair<Json, const char*> refused[] = {
      {{{"thinking", {{"type", "adaptive"}, {"display", "loud"}}}}, "thinking.display"},
      {{{"output_config", {{"effort", "extreme"}}}}, "output_config.effort"},
      {{{"output_config", {{"format", {{"type", "regex"}}}}}}, "output_config.format"},
      {{{"output_config", {{"format", {{"type", "json_schema"}, {"schema", {{"type", "integer"}, {"multipleOf", 3}}}}}}}},
       "output_config.format"}};
  for (const auto& [extra, param] : refused) {
    Json req = {{"max_tokens", 4}, {"messages", hello}};
    for (auto& [k, v] : extra.items()) req[k] = v;
    auto [st, err] = Post(c, "/v1/messages", req);
    EXPECT_EQ(st, 400) << req.dump();
    EXPECT_EQ(err["type"], "error") << err.dump();
    EXPECT_EQ(err["error"]["param"], param) << err.dump();
  }
}

// Anthropic's clients list models with `anthropic-version` set: they get
// Anthropic's model objects (and errors); OpenAI's clients keep OpenAI's.
TEST_F(MessagesApi, ModelsInAnthropicsShapeForAnthropicsClients) {
  ServeOptions o;
  o.model_id = "tiny";
  o.api_key = "secret";
  Running s(o);
  httplib::Client c = s.Client();
  const httplib::Headers anthropic = {{"x-api-key", "secret"}, {"anthropic-version", "2023-06-01"}};
  auto list = c.Get("/v1/models", anthropic);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  Json l = ParseBody(list->body);
  ASSERT_EQ(l["data"].size(), 1u) << l.dump();
  const Json& m = l["data"][0];
  EXPECT_EQ(m["type"], "model");
  EXPECT_EQ(m["id"], "tiny");
  EXPECT_EQ(m["display_name"], "tiny");
  // RFC 3339 in UTC, e.g. 2026-12-05T11:48:48Z.
  const std::string when = m["created_at"].get<std::string>();
  ASSERT_EQ(when.size(), 20u) << when;
  EXPECT_EQ(when[4], '-');
  EXPECT_EQ(when[10], 'T');
  EXPECT_EQ(when[19], 'Z');
  EXPECT_GE(std::stoi(when.substr(0, 4)), 2024);
  EXPECT_EQ(m["lifecycle"], "active");
  EXPECT_EQ(m["max_input_tokens"], TinyEngine()->info().ctx_tokens);
  EXPECT_EQ(l["has_more"], false);
  EXPECT_EQ(l["first_id"], "tiny");
  EXPECT_EQ(l["last_id"], "tiny");
  auto one = c.Get("/v1/models/tiny", anthropic);
  ASSERT_TRUE(one);
  EXPECT_EQ(ParseBody(one->body), m);
  auto missing = c.Get("/v1/models/claude-sonnet-4", anthropic);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(ParseBody(missing->body)["type"], "error") << missing->body;
  EXPECT_EQ(ParseBody(missing->body)["error"]["type"], "not_found_error") << missing->body;
  auto denied = c.Get("/v1/models", {{"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(ParseBody(denied->body)["error"]["type"], "authentication_error") << denied->body;
  EXPECT_EQ(ParseBody(denied->body)["type"], "error") << denied->body;
  // Without the header: OpenAI's list.
  auto openai = c.Get("/v1/models", {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(openai);
  EXPECT_EQ(ParseBody(openai->body)["object"], "list");
  EXPECT_EQ(ParseBody(openai->body)["data"][0]["object"], "model");
  EXPECT_FALSE(ParseBody(openai->body).contains("has_more"));
}

}  // namespace
}  // namespace waste::server
