// Images through `waste serve`: a K3-shaped container with a vision tower
// of the suite's own (waste-gen --vision), served in-process over a real
// socket. A chat request with image_url data URLs must generate exactly
// the greedy tokens the library gives for the same prompt and images
// (images added from their files, pads expanded, Generate at temperature
// 0), and every bad image must be a 400 naming the field.
#include <gtest/gtest.h>

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "chat_turn.h"
#include "cli/subprocess.h"
#include "http_server.h"
#include "json_text.h"
#include "prepare.h"
#include "temp_dir.h"
#include "waste/waste.h"

namespace waste::server {
namespace {

const std::string kImages = std::string(WASTE_SOURCE_DIR) + "/tests/data/images/";

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string Base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(k[(n >> s) & 63]);
  }
  if (i + 1 == in.size()) {
    uint32_t n = uint8_t(in[i]) << 16;
    out += {k[(n >> 18) & 63], k[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {k[(n >> 18) & 63], k[(n >> 12) & 63], k[(n >> 6) & 63], '='};
  }
  return out;
}

std::string DataUrl(const std::string& file, const std::string& mime) {
  return "data:" + mime + ";base64," + Base64(ReadFile(kImages + file));
}

// A 112x84 24-bit BMP with a colour gradient: large enough for several
// image rows under the generated tower's patch budget (the test images in
// tests/data are 23x17, one row each).
std::string GradientBmp() {
  const int w = 112, h = 84, stride = (w * 3 + 3) / 4 * 4;
  std::string b(54 + static_cast<size_t>(stride) * h, '\0');
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
  };
  b[0] = 'B';
  b[1] = 'M';
  put32(2, static_cast<uint32_t>(b.size()));
  put32(10, 54);
  put32(14, 40);
  put32(18, w);
  put32(22, h);
  b[26] = 1;   // planes
  b[28] = 24;  // bits per pixel
  put32(34, static_cast<uint32_t>(stride) * h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      size_t at = 54 + static_cast<size_t>(y) * stride + static_cast<size_t>(x) * 3;
      b[at] = static_cast<char>(x * 2);
      b[at + 1] = static_cast<char>(y * 3);
      b[at + 2] = static_cast<char>((x * y) & 0xff);
    }
  }
  return b;
}

Json ImagePart(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

Json Request(Json content) {
  return {{"messages", Json::array({{{"role", "user"}, {"content", std::move(content)}}})},
          {"max_tokens", 12},
          {"temperature", 0},
          {"thinking", false}};
}

Json ParseBody(const std::string& s) {
  Json j;
  std::string err;
  ParseJson(s, &j, &err);
  return j;
}

// One generated vision container and two engines on it: one behind the
// server, one for the library-side expectation.
class VisionServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    dir_ = *tmp_ / "k3v";
    auto g = test::Subprocess::Spawn({WASTE_GEN_BINARY, dir_, "--preset", "k3-tiny", "--tokenizer",
                                      "--seed", "7", "--vision", "32,2,48,64,2,4,6,36", "-q"});
    if (!g) return;
    g->CloseStdin();
    if (!g->Wait(120) || g->result().exit_code != 0) return;
    Config cfg;
    cfg.vision = true;
    cfg.ctx_tokens = 1024;
    cfg.rewind_marks = true;  // as `waste serve` opens it (prefix reuse keeps marks)
    auto a = Engine::Open(dir_, cfg);
    auto b = Engine::Open(dir_, cfg);
    if (!a || !b) return;
    served_ = a->release();
    library_ = b->release();
  }
  static void TearDownTestSuite() {
    delete served_;
    delete library_;
    delete tmp_;
  }
  void SetUp() override {
    ASSERT_NE(served_, nullptr) << "waste-gen or opening the vision container failed";
    ASSERT_TRUE(served_->has_vision());
  }

  struct Server {
    std::unique_ptr<HttpServer> http;
    std::thread thread;
    int port = -1;
    ~Server() {
      if (http) http->Stop();
      if (thread.joinable()) thread.join();
    }
  };
  std::unique_ptr<Server> Start(Engine* engine, bool vision, int parallel = 1) {
    ServeOptions o;
    o.parallel = parallel;
    o.host = "127.0.0.1";
    o.port = 0;
    o.container_dir = dir_;
    o.vision = vision;
    auto s = std::make_unique<Server>();
    auto h = HttpServer::Create(*engine, o);
    EXPECT_TRUE(h) << h.error().ToString();
    if (!h) return nullptr;
    s->http = std::move(*h);
    auto port = s->http->Bind();
    s->port = port ? *port : -1;
    s->thread = std::thread([p = s.get()] { (void)p->http->Serve(); });
    return s;
  }
  Json Post(const Server& s, const Json& body, int* status) {
    httplib::Client c("127.0.0.1", s.port);
    c.set_read_timeout(120, 0);
    auto res = c.Post("/v1/chat/completions", Dump(body, JsonStyle::kCompact), "application/json");
    *status = res ? res->status : -1;
    return res ? ParseBody(res->body) : Json();
  }

  static testing::TempDir* tmp_;
  static std::string dir_;
  static Engine* served_;
  static Engine* library_;
};
testing::TempDir* VisionServe::tmp_ = nullptr;
std::string VisionServe::dir_;
Engine* VisionServe::served_ = nullptr;
Engine* VisionServe::library_ = nullptr;

TEST_F(VisionServe, SameGreedyTokensAsTheLibrary) {
  auto server = Start(served_, true);
  ASSERT_TRUE(server);
  Json body = Request(Json::array({{{"type", "text"}, {"text", "Compare "}},
                                   ImagePart("data:image/bmp;base64," + Base64(GradientBmp())),
                                   {{"type", "text"}, {"text", " with "}},
                                   ImagePart(DataUrl("baseline.jpg", "image/jpeg"))}));
  int status = 0;
  Json reply = Post(*server, body, &status);
  ASSERT_EQ(status, 200) << Dump(reply, JsonStyle::kSpaced);

  // The library: the same rendered prompt, images from their files.
  ChatFormat format = ResolveChatFormat(*library_, false);
  ASSERT_EQ(format.kind, ChatFormat::Kind::kXtml);
  format.vision.enabled = true;
  PreparedChat chat;
  ServeLimits limits{1024, 4096};
  ASSERT_FALSE(PrepareChat(body, format, *library_, limits, &chat));
  ASSERT_EQ(chat.images.size(), 2u);
  library_->ClearImages();
  testing::TempDir files;
  const std::string bmp = files / "gradient.bmp";
  std::ofstream(bmp, std::ios::binary) << GradientBmp();
  ASSERT_TRUE(library_->AddImage(bmp));
  ASSERT_TRUE(library_->AddImage(kImages + "baseline.jpg"));
  auto ids = library_->ExpandImagePads(chat.ids);
  ASSERT_TRUE(ids) << ids.error().ToString();
  EXPECT_GT(ids->size(), chat.ids.size());  // the pads became rows
  EXPECT_EQ(static_cast<int>(ids->size()), chat.prompt_tokens);
  library_->ResetState();
  GenParams p = chat.params;
  std::vector<int> tokens;
  std::vector<std::string> pieces;
  ASSERT_TRUE(library_->Generate(*ids, p, [&](const TokenEvent& ev) {
    tokens.push_back(ev.token);
    pieces.emplace_back(ev.piece);
    return ev.token != format.stop_id;
  }));
  int eos = library_->info().eos_id == format.stop_id ? -1 : library_->info().eos_id;
  ChatTurn turn(ReplyParser(format.markers, false), {}, eos);
  std::vector<Json> deltas;
  for (size_t i = 0; i < tokens.size(); ++i) turn.OnToken(tokens[i], pieces[i], &deltas);
  turn.Finish(&deltas);

  EXPECT_EQ(reply["usage"]["prompt_tokens"], static_cast<int>(ids->size()));
  EXPECT_EQ(reply["usage"]["completion_tokens"], static_cast<int>(tokens.size()));
  EXPECT_EQ(reply["choices"][0]["message"], turn.Message()) << "tokens differ from the library's";

  // Images never leak into the next request: the same text without them
  // has the short prompt.
  Json plain = Request(Json::array({{{"type", "text"}, {"text", "Compare  with "}}}));
  Json r2 = Post(*server, plain, &status);
  ASSERT_EQ(status, 200);
  EXPECT_LT(r2["usage"]["prompt_tokens"].get<int>(), static_cast<int>(ids->size()));
}

// n = 2 with an image: the engine lets a call's images go once it has fed
// them, so the second choice has the images encoded and queued again; both
// choices are then the n = 1 reply to the bit (greedy, with logprobs).
TEST_F(VisionServe, EveryChoiceSeesTheImages) {
  auto server = Start(served_, true);
  ASSERT_TRUE(server);
  Json body = Request(Json::array({{{"type", "text"}, {"text", "Describe "}},
                                   ImagePart(DataUrl("baseline.jpg", "image/jpeg"))}));
  body["logprobs"] = true;
  int status = 0;
  Json one = Post(*server, body, &status);
  ASSERT_EQ(status, 200) << Dump(one, JsonStyle::kSpaced);
  body["n"] = 2;
  Json two = Post(*server, body, &status);
  ASSERT_EQ(status, 200) << Dump(two, JsonStyle::kSpaced);
  ASSERT_EQ(two["choices"].size(), 2u);
  EXPECT_EQ(two["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"]);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(two["choices"][i]["message"], one["choices"][0]["message"]);
    EXPECT_EQ(two["choices"][i]["logprobs"], one["choices"][0]["logprobs"]);
  }
  // Nothing of the images is left queued for the next request.
  EXPECT_EQ(served_->queued_images(), 0);
}

// Anthropic's image blocks (base64 source) through /v1/messages: the same
// prompt and the same greedy reply as the chat request with the same
// image as a data: URL, and a tool_result may carry one too.
TEST_F(VisionServe, MessagesApiImageBlocks) {
  auto server = Start(served_, true);
  ASSERT_TRUE(server);
  const std::string jpeg = ReadFile(kImages + "baseline.jpg");
  int status = 0;
  Json chat = Post(*server, Request(Json::array({{{"type", "text"}, {"text", "Describe "}},
                                                 ImagePart("data:image/jpeg;base64," + Base64(jpeg))})),
                   &status);
  ASSERT_EQ(status, 200) << Dump(chat, JsonStyle::kSpaced);
  const Json image = {{"type", "image"},
                      {"source", {{"type", "base64"}, {"media_type", "image/jpeg"}, {"data", Base64(jpeg)}}}};
  httplib::Client c("127.0.0.1", server->port);
  c.set_read_timeout(120, 0);
  const Json req = {{"max_tokens", 12}, {"thinking", {{"type", "disabled"}}},
                    {"messages", Json::array({{{"role", "user"},
                                               {"content", Json::array({{{"type", "text"}, {"text", "Describe "}},
                                                                        image})}}})}};
  auto r = c.Post("/v1/messages", Dump(req, JsonStyle::kCompact), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json msg = ParseBody(r->body);
  EXPECT_EQ(msg["usage"]["input_tokens"].get<int>() + msg["usage"]["cache_read_input_tokens"].get<int>(),
            chat["usage"]["prompt_tokens"].get<int>());
  const Json& text = chat["choices"][0]["message"]["content"];
  std::string mine;
  for (const Json& b : msg["content"]) {
    if (b["type"] == "text") mine += b["text"].get<std::string>();
  }
  EXPECT_EQ(mine, text.is_string() ? text.get<std::string>() : "");
  // count_tokens counts the image by its rows.
  Json count_req = req;
  count_req.erase("max_tokens");
  auto n = c.Post("/v1/messages/count_tokens", Dump(count_req, JsonStyle::kCompact), "application/json");
  ASSERT_TRUE(n);
  EXPECT_EQ(ParseBody(n->body)["input_tokens"], chat["usage"]["prompt_tokens"]) << n->body;
  // A screenshot as a tool's result.
  const Json round = {
      {"max_tokens", 4},
      {"tools", Json::array({{{"name", "screenshot"}, {"input_schema", {{"type", "object"}}}}})},
      {"messages", Json::array({{{"role", "user"}, {"content", "Look"}},
                                {{"role", "assistant"},
                                 {"content", Json::array({{{"type", "tool_use"}, {"id", "call_1"},
                                                           {"name", "screenshot"}, {"input", Json::object()}}})}},
                                {{"role", "user"},
                                 {"content", Json::array({{{"type", "tool_result"}, {"tool_use_id", "call_1"},
                                                           {"content", Json::array({image})}}})}}})}};
  auto t = c.Post("/v1/messages", Dump(round, JsonStyle::kCompact), "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 200) << t->body;
  EXPECT_GT(ParseBody(t->body)["usage"]["input_tokens"].get<int>() +
                ParseBody(t->body)["usage"]["cache_read_input_tokens"].get<int>(),
            chat["usage"]["prompt_tokens"].get<int>())
      << "the image's rows are in the prompt";
  EXPECT_EQ(served_->queued_images(), 0);
}

// --parallel 3: two requests with images and one without, sent at once,
// get exactly the replies each gets alone. The model's image queue is one
// for all sessions: the image requests hold it in turn while the text one
// runs beside them, so no request splices another's rows (without the
// lock, requests fail or get another's image within the first rounds).
TEST_F(VisionServe, ConcurrentImageRequestsGetTheirOwnImages) {
  Config cfg;
  cfg.vision = true;
  cfg.ctx_tokens = 1024;
  cfg.rewind_marks = true;
  cfg.max_sessions = 3;
  auto engine = Engine::Open(dir_, cfg);
  ASSERT_TRUE(engine) << engine.error().ToString();
  auto server = Start(engine->get(), true, 3);
  ASSERT_TRUE(server);
  const Json bodies[] = {
      Request(Json::array({{{"type", "text"}, {"text", "Describe "}},
                           ImagePart("data:image/bmp;base64," + Base64(GradientBmp()))})),
      Request(Json::array({{{"type", "text"}, {"text", "Describe "}},
                           ImagePart(DataUrl("baseline.jpg", "image/jpeg"))})),
      Request(Json::array({{{"type", "text"}, {"text", "Describe nothing at all, at length"}}})),
  };
  Json alone[3], together[3];
  int status[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    alone[i] = Post(*server, bodies[i], &status[i]);
    ASSERT_EQ(status[i], 200) << Dump(alone[i], JsonStyle::kSpaced);
  }
  // The two images give different prompts (so a swapped splice would show).
  EXPECT_NE(alone[0]["usage"]["prompt_tokens"], alone[1]["usage"]["prompt_tokens"]);
  for (int round = 0; round < 12; ++round) {
    std::vector<std::thread> clients;
    for (int i = 0; i < 3; ++i) {
      clients.emplace_back([&, i] { together[i] = Post(*server, bodies[i], &status[i]); });
    }
    for (std::thread& t : clients) t.join();
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE("round " + std::to_string(round) + ", request " + std::to_string(i));
      ASSERT_EQ(status[i], 200) << Dump(together[i], JsonStyle::kSpaced);
      EXPECT_EQ(together[i]["choices"][0]["message"], alone[i]["choices"][0]["message"]);
      EXPECT_EQ(together[i]["usage"]["prompt_tokens"], alone[i]["usage"]["prompt_tokens"]);
    }
  }
}

TEST_F(VisionServe, BadImagesAre400sNamingTheField) {
  auto server = Start(served_, true);
  ASSERT_TRUE(server);
  struct Case {
    const char* what;
    Json content;
    const char* param;
    const char* code;       // nullptr: none
    const char* message;    // a part of it
  };
  Json many = Json::array();
  for (int i = 0; i < 33; ++i) many.push_back(ImagePart(DataUrl("rgb.png", "image/png")));
  std::vector<Case> cases = {
      {"remote", Json::array({ImagePart("https://example.com/cat.png")}), "image_url", nullptr,
       "not fetched"},
      {"bad base64", Json::array({ImagePart("data:image/png;base64,iVBO RK==")}), "image_url",
       nullptr, "not valid base64"},
      {"not base64", Json::array({ImagePart("data:image/png,abc")}), "image_url", nullptr,
       "only base64"},
      {"not an image", Json::array({ImagePart(DataUrl("not_an_image.txt", "image/png"))}),
       "image_url", "invalid_image", "messages[0].content[0]"},
      {"truncated", Json::array({ImagePart(DataUrl("truncated.png", "image/png"))}), "image_url",
       "invalid_image", "messages[0].content[0]"},
      {"over the pixel limit", Json::array({ImagePart(DataUrl("huge_header.png", "image/png"))}),
       "image_url", "invalid_image", "pixel"},
      {"no url", Json::array({{{"type", "image_url"}, {"image_url", Json::object()}}}),
       "messages[0].content[0]", nullptr, "no url"},
      {"local path", Json::array({ImagePart(kImages + "rgb.png")}), "image_url", nullptr,
       "--allow-local-images"},
      {"33 images", many, "messages", nullptr, "at most 32"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    int status = 0;
    Json r = Post(*server, Request(c.content), &status);
    EXPECT_EQ(status, 400) << Dump(r, JsonStyle::kSpaced);
    const Json& e = r["error"];
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_EQ(e["param"], c.param);
    EXPECT_EQ(e["code"], c.code ? Json(c.code) : Json(nullptr));
    EXPECT_NE(e["message"].get<std::string>().find(c.message), std::string::npos)
        << e["message"];
  }
  // The server still answers after all of that.
  int status = 0;
  Post(*server, Request(Json::array({ImagePart(DataUrl("rgb.png", "image/png"))})), &status);
  EXPECT_EQ(status, 200);
}

TEST_F(VisionServe, WithoutVisionImagesAreRefused) {
  auto server = Start(library_, false);
  ASSERT_TRUE(server);
  int status = 0;
  Json r = Post(*server, Request(Json::array({ImagePart(DataUrl("rgb.png", "image/png"))})), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["code"], "vision_disabled");
}

}  // namespace
}  // namespace waste::server
