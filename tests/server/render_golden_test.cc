// render.json: every request the reference rendered, our segments and ids
// must be the same; every refusal the same status, type, param and code.
#include <gtest/gtest.h>

#include "golden_util.h"
#include "prepare.h"

namespace waste::server {
namespace {

using testing::LoadServeFixture;
using testing::TinyEngine;

// Cases rendered by a server started with --vision. The tokenizer
// container has no tower, so each media pad stays one id — exactly what the
// goldens record (ids before expansion).
bool NeedsVision(const Json& c) { return c["server"].value("vision", false); }

// Where we answer differently on purpose (docs/SERVER.md): an image whose
// bytes are not an image is the request's fault, a 400 naming image_url,
// not the reference's 500 with a temp path in it; a bad
// max_completion_tokens is named max_completion_tokens; reasoning_effort
// "medium" and n = 2 are served (below). (`logprobs: true`
// is no longer ignored: it is answered, and the prompt is the golden's.)
const Json* OurAnswer(const std::string& name) {
  static const Json kUndecodable = {{"status", 400},
                                    {"error",
                                     {{"error",
                                       {{"type", "invalid_request_error"},
                                        {"param", "image_url"},
                                        {"code", "invalid_image"}}}}}};
  if (name == "image_undecodable_is_500") return &kUndecodable;
  // A bad max_completion_tokens is named as sent (the reference said max_tokens).
  static const Json kMaxCompletion = {{"status", 400},
                                      {"error",
                                       {{"error",
                                         {{"type", "invalid_request_error"},
                                          {"param", "max_completion_tokens"},
                                          {"code", nullptr}}}}}};
  if (name == "max_completion_tokens_float") return &kMaxCompletion;
  return nullptr;
}

ChatFormat FormatFor(const Json& c, const Engine& engine) {
  ChatFormat f;
  const Json& server = c["server"];
  if (server["format"] == "xtml") {
    f = ResolveChatFormat(engine, false);
    f.default_thinking = server.value("default_thinking", true);
    f.vision.enabled = NeedsVision(c);
    f.vision.allow_local_paths = server.value("allow_local_images", false);
  } else {
    f.kind = ChatFormat::Kind::kChatJson;
    auto t = ChatTemplate::Parse(Dump(server["chat_json"], JsonStyle::kCompact), "chat.json");
    EXPECT_TRUE(t.has_value());
    if (t) f.tmpl = *t;
    f.default_thinking = false;
    f.stop_id = 15;
  }
  return f;
}

TEST(RenderGolden, EveryCaseMatchesTheReference) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  Engine* engine = TinyEngine();
  ASSERT_NE(engine, nullptr);
  Json fixture = LoadServeFixture("render.json");
  int checked = 0, vision = 0;
  for (const Json& c : fixture["cases"]) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    if (NeedsVision(c)) ++vision;
    ChatFormat format = FormatFor(c, *engine);
    ServeLimits limits;
    // operator[] on a const json with a missing key is undefined: look first.
    static const Json kNoServer = Json::object();
    const Json& server = c.contains("server") ? c.at("server") : kNoServer;
    limits.ctx_max = server.contains("ctx_max") && server.at("ctx_max").is_number()
                         ? server.at("ctx_max").get<uint32_t>()
                         : 4096;
    limits.default_max_tokens = server.value("default_max_tokens", 4096);
    PreparedChat out;
    auto err = PrepareChat(c["request"], format, *engine, limits, &out);
    if (name == "effort_medium_refused" || name == "n_2_refused") {
      // Ours: "medium" (OpenAI's default effort) is thinking with the
      // model's default effort; n = 2 is two replies (docs/SERVER.md,
      // "Several completions"). Either way the prompt of the request
      // without the field.
      ASSERT_FALSE(err.has_value()) << err->message;
      Json plain = c["request"];
      plain.erase(name == "n_2_refused" ? "n" : "reasoning_effort");
      if (name == "n_2_refused") EXPECT_EQ(out.choices, 2);
      PreparedChat want;
      ASSERT_FALSE(PrepareChat(plain, format, *engine, limits, &want));
      EXPECT_EQ(out.ids, want.ids);
      ++checked;
      continue;
    }
    const Json& expect = OurAnswer(name) ? *OurAnswer(name) : c["expect"];
    int status = expect.value("status", 200);
    if (status != 200) {
      ASSERT_TRUE(err.has_value()) << "expected " << status;
      EXPECT_EQ(err->status, status);
      const Json& e = expect["error"]["error"];
      EXPECT_EQ(err->type, e["type"].get<std::string>());
      EXPECT_EQ(err->param ? Json(*err->param) : Json(nullptr), e["param"]);
      EXPECT_EQ(err->code ? Json(*err->code) : Json(nullptr), e["code"]);
      ++checked;
      continue;
    }
    ASSERT_FALSE(err.has_value()) << err->message;
    const Json& segs = expect["segments"];
    ASSERT_EQ(out.prompt.segments.size(), segs.size());
    for (size_t i = 0; i < segs.size(); ++i) {
      EXPECT_EQ(out.prompt.segments[i].text, segs[i][0].get<std::string>()) << "segment " << i;
      EXPECT_EQ(out.prompt.segments[i].mode == SegmentMode::kMarkup, segs[i][1].get<bool>())
          << "segment " << i;
    }
    if (expect.contains("channel")) {
      EXPECT_EQ(out.prompt.think_channel, expect["channel"] == "think");
    }
    if (expect.contains("token_ids")) {
      EXPECT_EQ(Json(out.ids), expect["token_ids"]);
    }
    const Json& p = expect["engine_params"];
    EXPECT_FLOAT_EQ(out.params.temperature, p["temperature"].get<float>());
    if (!p["top_p"].is_null()) EXPECT_FLOAT_EQ(out.params.top_p, p["top_p"].get<float>());
    if (!p["top_k"].is_null()) EXPECT_EQ(out.params.top_k, p["top_k"].get<int>());
    if (!p["seed"].is_null()) EXPECT_EQ(out.params.seed, p["seed"].get<uint64_t>());
    if (p.contains("max_tokens")) EXPECT_EQ(out.params.max_tokens, p["max_tokens"].get<int>());
    if (p.contains("stop_tokens")) EXPECT_EQ(Json(out.params.stop_tokens), p["stop_tokens"]);
    ++checked;
  }
  EXPECT_GT(checked, 90);
  EXPECT_EQ(vision, 10);
  std::printf("render.json: %d cases checked, %d of them with --vision\n", checked, vision);
}

TEST(RenderGolden, RenderingTwiceGivesTheSameIds) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  Engine* engine = TinyEngine();
  ASSERT_NE(engine, nullptr);
  Json fixture = LoadServeFixture("render.json");
  ChatFormat format = ResolveChatFormat(*engine, false);
  for (const Json& c : fixture["cases"]) {
    if (c["server"]["format"] != "xtml" || c["expect"].value("status", 200) != 200) continue;
    if (OurAnswer(c["name"]) && OurAnswer(c["name"])->value("status", 200) != 200) continue;
    format.vision.enabled = NeedsVision(c);
    PreparedChat a, b;
    ServeLimits limits{4096, 4096};
    ASSERT_FALSE(PrepareChat(c["request"], format, *engine, limits, &a));
    ASSERT_FALSE(PrepareChat(c["request"], format, *engine, limits, &b));
    EXPECT_EQ(a.ids, b.ids) << c["name"];
  }
}

}  // namespace
}  // namespace waste::server
