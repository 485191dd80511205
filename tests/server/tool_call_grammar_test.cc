// Tool calls under tool_choice "auto" and "required" with several tools:
// the reply grammar is an alternation over the declared tools, each with
// its own schema's rules (prefixed so they cannot collide). Under "auto"
// it is lazy: free until the model writes <|open|>, and then the element
// is either a valid tools block or some other element.
#include <gtest/gtest.h>

#include <random>

#include "constraint.h"
#include "golden_util.h"
#include "prepare.h"
#include "reply_parser.h"

namespace waste::server {
namespace {

using testing::TinyEngine;

const char* kWeather = R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
    "days": {"type": "integer"}}, "required": ["city", "days"], "additionalProperties": false})";
const char* kSearch = R"({"type": "object", "properties": {"query": {"type": "string", "maxLength": 10},
    "exact": {"type": "boolean"}}, "required": ["query"], "additionalProperties": false})";

Json ParseBody(const std::string& s) {
  Json j;
  std::string err;
  ParseJson(s, &j, &err);
  return j;
}

bool Validates(const char* schema, const std::string& text) {
  auto g = Grammar::FromJsonSchema(schema);
  if (!g) return false;
  GrammarMatcher m(*g, nullptr);
  return m.AcceptText(text) && m.CanEnd();
}

class ToolCallGrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
    ASSERT_NE(TinyEngine(), nullptr);
    format_ = ResolveChatFormat(*TinyEngine(), false);
    ASSERT_EQ(format_.kind, ChatFormat::Kind::kXtml);
    ASSERT_NE(format_.vocab, nullptr);
  }
  // get_weather (kWeather) and search (kSearch).
  static Json Tools() {
    return Json::array(
        {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", ParseBody(kWeather)}}}},
         {{"type", "function"}, {"function", {{"name", "search"}, {"parameters", ParseBody(kSearch)}}}}});
  }
  PreparedChat Prepare(const std::string& tool_choice, bool thinking) {
    return PrepareWith(Tools(), tool_choice, thinking);
  }
  PreparedChat PrepareWith(const Json& tools, const std::string& tool_choice, bool thinking,
                           const Json& extra = Json::object()) {
    Json body = {{"messages", Json::array({{{"role", "user"}, {"content", "Weather?"}}})},
                 {"tools", tools},
                 {"thinking", thinking},
                 {"max_tokens", 200}};
    if (!tool_choice.empty()) body["tool_choice"] = tool_choice;
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    PreparedChat chat;
    ServeLimits limits;
    limits.ctx_max = 4096;
    auto e = PrepareChat(body, format_, *TinyEngine(), limits, &chat);
    EXPECT_FALSE(e.has_value()) << (e ? e->message : "");
    return chat;
  }
  ChatFormat format_;
};

// The lazy grammar after <|open|>, fed as the model would write a call:
// each tool's valid arguments pass, the other tool's are refused.
TEST_F(ToolCallGrammarTest, CombinedGrammarTakesEachToolsArgumentsOnly) {
  PreparedChat chat = Prepare("auto", false);
  ASSERT_NE(chat.grammar, nullptr);
  ASSERT_EQ(chat.grammar_triggers, std::vector<int>{format_.markers.open});
  const XtmlMarkers& mk = format_.markers;
  auto start_call = [&](const std::string& tool) {
    auto m = std::make_unique<GrammarMatcher>(chat.grammar, format_.vocab);
    EXPECT_TRUE(m->AcceptText("tools"));
    m->Accept(mk.sep);
    m->Accept(mk.open);
    EXPECT_TRUE(m->AcceptText("call tool=\"" + tool + "\""));
    m->Accept(mk.sep);
    m->Accept(mk.open);
    EXPECT_TRUE(m->AcceptText("json type=\"object\""));
    m->Accept(mk.sep);
    EXPECT_FALSE(m->Dead());
    return m;
  };
  const std::string weather_args = R"({"city": "Oslo", "days": 3})";
  const std::string search_args = R"({"query": "rain", "exact": true})";
  EXPECT_TRUE(start_call("get_weather")->AcceptText(weather_args));
  EXPECT_TRUE(start_call("search")->AcceptText(search_args));
  EXPECT_FALSE(start_call("get_weather")->AcceptText(search_args));
  EXPECT_FALSE(start_call("search")->AcceptText(weather_args));
  // An undeclared tool name cannot be written.
  auto m = std::make_unique<GrammarMatcher>(chat.grammar, format_.vocab);
  ASSERT_TRUE(m->AcceptText("tools"));
  m->Accept(mk.sep);
  m->Accept(mk.open);
  EXPECT_FALSE(m->AcceptText("call tool=\"rm_rf\""));
  // A complete call closes the tools element and ends the message.
  auto done = start_call("search");
  ASSERT_TRUE(done->AcceptText(search_args));
  done->Accept(mk.close);
  ASSERT_TRUE(done->AcceptText("json"));
  done->Accept(mk.sep);
  done->Accept(mk.close);
  ASSERT_TRUE(done->AcceptText("call"));
  done->Accept(mk.sep);
  EXPECT_TRUE(done->Allows(mk.open));  // a second call may follow
  done->Accept(mk.close);
  ASSERT_TRUE(done->AcceptText("tools"));
  done->Accept(mk.sep);
  EXPECT_TRUE(done->Allows(mk.end_of_msg));
  done->Accept(mk.end_of_msg);
  EXPECT_TRUE(done->MustEnd());
  // Other elements stay free; a header starting like "tools"/"call" must be one.
  auto other = std::make_unique<GrammarMatcher>(chat.grammar, format_.vocab);
  EXPECT_TRUE(other->AcceptText("response"));
  other->Accept(mk.sep);
  EXPECT_TRUE(other->MustEnd());
  auto callish = std::make_unique<GrammarMatcher>(chat.grammar, format_.vocab);
  EXPECT_FALSE(callish->AcceptText("call tool=\"search\""));
}

// The typed form, as K3's encoder writes an arguments object and so as the
// model writes calls: one <argument key= type=> element per key, a string
// raw, other values as JSON, in any order, each key once, every required
// key present, each value within its property's schema.
class TypedCall {
 public:
  // `after_response`: the grammar is an eager one (tool_choice required),
  // so the empty response channel comes first.
  TypedCall(const PreparedChat& chat, const ChatFormat& f, const std::string& header,
            bool after_response = false)
      : m_(std::make_unique<GrammarMatcher>(chat.grammar, f.vocab)), mk_(f.markers), parser_(mk_, false) {
    if (after_response) ok_ = Token(mk_.close) && Text("response") && Token(mk_.sep) && Token(mk_.open);
    Text("tools");
    Token(mk_.sep);
    Token(mk_.open);
    ok_ = Text(header) && ok_;
    Token(mk_.sep);
  }
  // One argument element; false when the grammar refuses any of it.
  bool Arg(const std::string& key, const std::string& type, const std::string& value) {
    if (!Token(mk_.open) || !Text("argument key=\"" + key + "\" type=\"" + type + "\"") ||
        !Token(mk_.sep) || (!value.empty() && !Text(value)) || !Token(mk_.close) ||
        !Text("argument") || !Token(mk_.sep)) {
      return false;
    }
    return true;
  }
  // Closes the call element.
  bool CloseCall() { return Token(mk_.close) && Text("call") && Token(mk_.sep); }
  // Closes the call, the tools element and the message; the parsed call's
  // arguments string ("" when the grammar refused the ending).
  std::string End() {
    if (!CloseCall() || !Token(mk_.close) ||
        !Text("tools") || !Token(mk_.sep) || !Token(mk_.end_of_msg) || !m_->MustEnd()) {
      return "";
    }
    parser_.Finish();
    return parser_.calls().size() == 1 ? parser_.calls()[0].ArgumentsString() : "";
  }
  bool CanClose() const { return m_->Allows(mk_.close); }
  bool CanOpen() const { return m_->Allows(mk_.open); }
  bool ok() const { return ok_; }

 private:
  bool Token(int id) {
    if (!m_->Allows(id)) return false;
    m_->Accept(id);
    parser_.Push(id, id == mk_.open ? "<|open|>" : id == mk_.sep ? "<|sep|>" : id == mk_.close ? "<|close|>" : "");
    return true;
  }
  bool Text(const std::string& text) {
    if (!m_->AcceptText(text)) return false;
    parser_.Push(-1, text);  // not a marker id: text
    return true;
  }
  std::unique_ptr<GrammarMatcher> m_;
  XtmlMarkers mk_;
  ReplyParser parser_;
  bool ok_ = true;
};

TEST_F(ToolCallGrammarTest, TypedArgumentsAsTheEncoderWritesThem) {
  PreparedChat chat = Prepare("auto", false);
  ASSERT_NE(chat.grammar, nullptr);
  const auto weather = [&] { return TypedCall(chat, format_, "call tool=\"get_weather\" index=\"1\""); };
  {
    TypedCall call = weather();
    ASSERT_TRUE(call.ok());
    ASSERT_TRUE(call.Arg("days", "number", "3"));
    ASSERT_TRUE(call.Arg("city", "string", "Oslo \"Sø\""));  // raw: quotes are text
    const std::string args = call.End();
    EXPECT_EQ(ParseBody(args), ParseBody(R"({"days": 3, "city": "Oslo \"Sø\""})")) << args;
    EXPECT_TRUE(Validates(kWeather, args)) << args;
  }
  {
    TypedCall call = weather();
    ASSERT_TRUE(call.Arg("city", "string", "Oslo"));
    EXPECT_FALSE(call.CanClose()) << "days is required";
    EXPECT_FALSE(call.Arg("city", "string", "Bergen")) << "a key once";
  }
  EXPECT_FALSE(weather().Arg("country", "string", "NO")) << "undeclared key";
  EXPECT_FALSE(weather().Arg("days", "string", "3")) << "days is a number";
  EXPECT_FALSE(weather().Arg("days", "number", "three"));
  EXPECT_FALSE(weather().Arg("days", "number", "2.5")) << "days is an integer";
  EXPECT_FALSE(weather().Arg("city", "string", "Llanfairpwllgwyngyll")) << "maxLength 12";
  TypedCall search(chat, format_, "call tool=\"search\"");  // no index: also taken
  EXPECT_FALSE(TypedCall(chat, format_, "call tool=\"search\"").Arg("exact", "boolean", "yes"));
  ASSERT_TRUE(search.Arg("exact", "boolean", "true"));
  EXPECT_FALSE(search.CanClose()) << "query is required";
  ASSERT_TRUE(search.Arg("query", "string", ""));  // an empty string: the element is empty
  const std::string args = search.End();
  EXPECT_EQ(ParseBody(args), ParseBody(R"({"exact": true, "query": ""})")) << args;
}

// More than six properties come in schema order (any order would take a
// rule per subset); a property without one plain type leaves the tool the
// <json> block only; a tool without parameters may be called with none.
TEST_F(ToolCallGrammarTest, TypedArgumentsWhereTheSchemaAllowsThem) {
  Json many = {{"type", "object"}, {"properties", Json::object()}, {"required", Json::array({"p6"})}};
  for (int i = 0; i < 7; ++i) many["properties"]["p" + std::to_string(i)] = {{"type", "integer"}};
  Json mixed = ParseBody(R"({"type": "object", "properties": {"v": {"type": ["string", "number"]}}})");
  Json tools = Json::array({{{"type", "function"}, {"function", {{"name", "many"}, {"parameters", many}}}},
                            {{"type", "function"}, {"function", {{"name", "mixed"}, {"parameters", mixed}}}},
                            {{"type", "function"}, {"function", {{"name", "ping"}}}}});
  PreparedChat chat = PrepareWith(tools, "auto", false);
  ASSERT_NE(chat.grammar, nullptr);
  {
    TypedCall call(chat, format_, "call tool=\"many\"");
    ASSERT_TRUE(call.Arg("p1", "number", "1"));
    ASSERT_TRUE(call.Arg("p6", "number", "6"));
    EXPECT_EQ(ParseBody(call.End()), ParseBody(R"({"p1": 1, "p6": 6})"));
  }
  {
    TypedCall call(chat, format_, "call tool=\"many\"");
    ASSERT_TRUE(call.Arg("p6", "number", "6"));
    EXPECT_FALSE(call.Arg("p1", "number", "1")) << "schema order beyond six properties";
  }
  EXPECT_FALSE(TypedCall(chat, format_, "call tool=\"mixed\"").Arg("v", "string", "x"));
  TypedCall ping(chat, format_, "call tool=\"ping\" index=\"2\"");
  EXPECT_TRUE(ping.CanClose());
  EXPECT_EQ(ping.End(), "{}");
}

// parallel_tool_calls false: one call, then the tools element must close
// (under auto, and under required with several tools).
TEST_F(ToolCallGrammarTest, ParallelToolCallsFalseAllowsOneCall) {
  for (const std::string choice : {"auto", "required"}) {
    for (bool parallel : {true, false}) {
      SCOPED_TRACE(choice + (parallel ? " parallel" : " one call"));
      PreparedChat chat = PrepareWith(Tools(), choice, false, {{"parallel_tool_calls", parallel}});
      ASSERT_NE(chat.grammar, nullptr);
      TypedCall call(chat, format_, "call tool=\"search\"", choice == "required");
      ASSERT_TRUE(call.ok());
      ASSERT_TRUE(call.Arg("query", "string", "rain"));
      ASSERT_TRUE(call.CloseCall());
      EXPECT_EQ(call.CanOpen(), parallel) << "a second call";
      EXPECT_TRUE(call.CanClose());
    }
  }
}

// Free text until the trigger, then a random walk over the allowed tokens
// (a stand-in for any model, however bad): every call it writes, typed or
// as a <json> block, parses to a declared tool whose arguments validate
// against that tool's schema.
TEST_F(ToolCallGrammarTest, RandomCallsUnderAutoAreValid) {
  PreparedChat chat = Prepare("", true);  // tool_choice absent = auto
  ASSERT_NE(chat.grammar, nullptr);
  const XtmlMarkers& mk = format_.markers;
  const int vocab = TinyEngine()->info().vocab;
  int calls_seen = 0, typed_calls = 0, block_calls = 0;
  for (int seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    const int max_tokens = 120;
    BudgetedGrammar c(chat.grammar, format_.vocab, max_tokens, chat.grammar_triggers);
    ReplyParser parser(mk, true);
    std::string trace;
    auto feed = [&](int t) {
      trace += "[" + std::to_string(t) + ":" + TinyEngine()->TokenPiece(t) + "]";
      c.Accept(t);
      parser.Push(t, TinyEngine()->TokenPiece(t));
    };
    // Free: any token, even one no grammar would take right now.
    EXPECT_TRUE(c.Allows(mk.close));
    feed(mk.close);
    feed(static_cast<int>(rng() % 50) + 100);  // a stray header piece
    feed(mk.sep);
    EXPECT_FALSE(c.matcher().active());
    feed(mk.open);  // "the model opens an element"
    ASSERT_TRUE(c.matcher().active());
    // Even seeds steer the header into "tools" (a model deciding to call);
    // odd seeds walk freely (mostly some other element).
    std::string want = seed % 2 == 0 ? "tools" : "";
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (int used = 4; used < max_tokens && c.matcher().active(); ++used) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      c.Mask(logits);
      std::vector<int> allowed;
      for (int i = 0; i < vocab; ++i) if (std::isfinite(logits[static_cast<size_t>(i)])) allowed.push_back(i);
      ASSERT_FALSE(allowed.empty());
      int pick = allowed[rng() % allowed.size()];
      size_t best = 0;
      for (int i : allowed) {
        std::string piece = TinyEngine()->TokenPiece(i);
        if (!piece.empty() && piece.size() > best && want.compare(0, piece.size(), piece) == 0) {
          best = piece.size();
          pick = i;
        }
      }
      want.erase(0, best);
      feed(pick);
    }
    parser.Finish();
    for (const ParsedCall& call : parser.calls()) {
      ++calls_seen;
      (call.json_block ? block_calls : typed_calls) += 1;
      std::string args = call.ArgumentsString();
      if (call.name == "get_weather") EXPECT_TRUE(Validates(kWeather, args)) << args;
      else if (call.name == "search") EXPECT_TRUE(Validates(kSearch, args)) << args << "\n" << trace;
      else ADD_FAILURE() << "undeclared tool " << call.name;
    }
  }
  // The even seeds wrote calls, in both forms (60 seeds: 6 typed and 24
  // blocks as of writing; the walks are deterministic).
  EXPECT_GT(typed_calls, 0);
  EXPECT_GT(block_calls, 0);
}

// tool_choice "required" with several tools: the reply must start with a
// call of one of them; "none" leaves the reply free.
TEST_F(ToolCallGrammarTest, RequiredWithSeveralToolsIsAnEagerAlternation) {
  PreparedChat chat = Prepare("required", false);
  ASSERT_NE(chat.grammar, nullptr);
  EXPECT_TRUE(chat.grammar_triggers.empty());
  const XtmlMarkers& mk = format_.markers;
  GrammarMatcher m(chat.grammar, format_.vocab);
  EXPECT_FALSE(m.Allows(mk.end_of_msg));
  EXPECT_FALSE(m.AcceptText("Sure"));
  m.Accept(mk.close);
  ASSERT_TRUE(m.AcceptText("response"));
  m.Accept(mk.sep);
  m.Accept(mk.open);
  ASSERT_TRUE(m.AcceptText("tools"));
  m.Accept(mk.sep);
  m.Accept(mk.open);
  EXPECT_TRUE(m.AcceptText("call tool=\"search\""));
  PreparedChat none = Prepare("none", false);
  EXPECT_EQ(none.grammar, nullptr);
}

}  // namespace
}  // namespace waste::server
