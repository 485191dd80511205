// chat's conversation record (cli/chat_history.h): a full context drops the
// oldest turns and re-reads the rest; the re-read must give the state the
// conversation had, images included (before, the re-read fed the kept
// turns' media pads with no image queued, so the model silently lost them).
#include "chat_history.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cli/subprocess.h"
#include "temp_dir.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

const std::string kImages = std::string(WASTE_SOURCE_DIR) + "/tests/data/images/";

// A 24-bit BMP with a colour ramp: big enough for several image rows (the
// test images in tests/data are one row each at this tower's patch size).
void WriteBmp(const std::string& path, int w, int h) {
  const int stride = (w * 3 + 3) & ~3;
  std::vector<uint8_t> f(54 + size_t(stride) * h, 0);
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) f[at + i] = uint8_t(v >> (8 * i));
  };
  f[0] = 'B';
  f[1] = 'M';
  put32(2, uint32_t(f.size()));
  put32(10, 54);
  put32(14, 40);
  put32(18, uint32_t(w));
  put32(22, uint32_t(h));
  f[26] = 1;
  f[28] = 24;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* px = &f[54 + size_t(y) * stride + size_t(x) * 3];
      px[0] = uint8_t(x * 4);
      px[1] = uint8_t(y * 4);
      px[2] = uint8_t((x ^ y) * 8);
    }
  }
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(f.data()),
                                              std::streamsize(f.size()));
}

class ChatHistoryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    dir_ = *tmp_ / "k3v";
    auto g = test::Subprocess::Spawn({WASTE_GEN_BINARY, dir_, "--preset", "k3-tiny",
                                      "--tokenizer", "--seed", "11", "--vision",
                                      "32,2,48,64,2,4,6,64", "-q"});
    ASSERT_TRUE(g);
    g->CloseStdin();
    ASSERT_TRUE(g->Wait(120));
    ASSERT_EQ(g->result().exit_code, 0) << g->result().err;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }

  static std::unique_ptr<Engine> Open() {
    Config cfg;
    cfg.vision = true;
    cfg.ctx_tokens = 512;
    auto e = Engine::Open(dir_, cfg);
    EXPECT_TRUE(e.has_value()) << (e.has_value() ? "" : e.error().message());
    return e.has_value() ? std::move(e).value() : nullptr;
  }

  static std::vector<int> Words(Engine& e, const std::string& text) {
    auto ids = e.Tokenize(text, /*markup=*/false, /*add_bos=*/false);
    EXPECT_TRUE(ids.has_value());
    return ids.has_value() ? *ids : std::vector<int>{};
  }

  static std::vector<float> Logits(Engine& e, const std::vector<int>& ids) {
    auto r = e.Eval(ids);
    EXPECT_TRUE(r.has_value()) << (r.has_value() ? "" : r.error().message());
    return r.has_value() ? std::vector<float>(r->begin(), r->end()) : std::vector<float>{};
  }

  static testing::TempDir* tmp_;
  static std::string dir_;
};

testing::TempDir* ChatHistoryTest::tmp_ = nullptr;
std::string ChatHistoryTest::dir_;

TEST_F(ChatHistoryTest, AReReadShowsTheKeptTurnsTheirImages) {
  std::unique_ptr<Engine> live = Open(), fresh = Open();
  ASSERT_TRUE(live && fresh);
  const int pad = live->media_pad_id();
  ASSERT_GE(pad, 0);

  ChatHistory history;
  history.system_ids = Words(*live, "be brief");
  // Turn 0: text whose "reply" holds a media pad (a model may write one):
  // it must read as the pad's own embedding, not take turn 1's image rows.
  ChatTurn t0{Words(*live, "hello there"), {}};
  t0.ids.push_back(pad);
  // Turn 1: two images, then text.
  ChatTurn t1;
  const std::string ramp = *tmp_ / "ramp.bmp";
  WriteBmp(ramp, 56, 42);
  ASSERT_TRUE(HoldImages(*live, {kImages + "rgba.png", ramp}, &t1.images));
  ASSERT_GT(t1.images[0].rows + t1.images[1].rows, 2);
  std::vector<int> raw = {pad, pad};
  for (int id : Words(*live, "what is shown")) raw.push_back(id);
  // Turn 2: text only.
  ChatTurn t2{Words(*live, "and then"), {}};

  // The live conversation, one call per chunk as chat makes them (the
  // system prompt with turn 0 in one call: the re-read joins image-free
  // turns, and call boundaries are part of bit-identity).
  std::vector<int> first = history.system_ids;
  first.insert(first.end(), t0.ids.begin(), t0.ids.end());
  Logits(*live, first);
  ASSERT_TRUE(AttachHeldImages(*live, t1.images, /*announce=*/false));
  auto expanded = live->ExpandImagePads(raw);
  ASSERT_TRUE(expanded.has_value()) << expanded.error().message();
  t1.ids = *expanded;
  ASSERT_EQ(t1.ids.size(), raw.size() + t1.images[0].rows + t1.images[1].rows - 2);
  Logits(*live, t1.ids);
  Logits(*live, t2.ids);
  const std::vector<int> probe = Words(*live, "so");
  const std::vector<float> want = Logits(*live, probe);

  history.turns = {t0, t1, t2};
  EXPECT_EQ(history.Tokens(), first.size() + t1.ids.size() + t2.ids.size());
  ASSERT_TRUE(history.ReRead(*fresh).ok());
  EXPECT_EQ(fresh->position(), live->position() - static_cast<int>(probe.size()));
  EXPECT_EQ(fresh->queued_images(), 0);
  const std::vector<float> got = Logits(*fresh, probe);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);

  // Without the images the same ids give another state: the check above
  // would see a re-read that lost them.
  ChatHistory blind = history;
  blind.turns[1].images.clear();
  ASSERT_TRUE(blind.ReRead(*fresh).ok());
  const std::vector<float> lost = Logits(*fresh, probe);
  EXPECT_NE(std::memcmp(lost.data(), want.data(), lost.size() * sizeof(float)), 0);
}

TEST_F(ChatHistoryTest, DropOldestToFitCountsWhatIsKept) {
  ChatHistory h;
  h.system_ids = {1, 2};
  h.turns = {ChatTurn{{3, 4, 5}, {}}, ChatTurn{{6, 7}, {}}, ChatTurn{{8}, {}}};
  EXPECT_EQ(h.Tokens(), 8u);
  EXPECT_EQ(h.DropOldestToFit(4, 12), 0u);  // 8 + 4 fits 12
  EXPECT_EQ(h.DropOldestToFit(4, 9), 1u);   // 5 + 4
  EXPECT_EQ(h.DropOldestToFit(9, 9), 2u);   // only the system prompt is left
  EXPECT_EQ(h.dropped, 3u);
  EXPECT_TRUE(h.turns.empty());
}

TEST_F(ChatHistoryTest, AnUnreadableImageIsNamed) {
  std::unique_ptr<Engine> e = Open();
  ASSERT_TRUE(e);
  std::vector<HeldImage> held;
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(HoldImages(*e, {kImages + "rgb.png", kImages + "no-such.png"}, &held));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("no-such.png"), std::string::npos) << err;
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(HoldImages(*e, {kImages + "not_an_image.txt"}, &held));
  const std::string err2 = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err2.find("not_an_image.txt"), std::string::npos) << err2;
}

}  // namespace
}  // namespace waste::cli
