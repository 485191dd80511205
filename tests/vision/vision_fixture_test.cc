// The vision pipeline against the reference's public vision set
// (warp-tiny-vision): pixel tensors, every tower stage, the projector rows,
// the prompt expansion, the last-position logits of the spliced prompt,
// the greedy continuation, and the queue's one-call lifetime.
// Tolerances (docs/VISION.md): PNG pixels exact; tower stages max|diff| <=
// 1e-4 x max|ref| of the stage; logits max|diff| <= 1e-3 x max|ref|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "container/container.h"
#include "kernels/kernel_table.h"
#include "runtime/ops.h"
#include "runtime/thread_pool.h"
#include "vision/image_decode.h"
#include "vision/preprocess.h"
#include "vision/vision_context.h"
#include "temp_dir.h"
#include "vision_fixture.h"
#include "waste/waste.h"

namespace waste {
namespace {

std::vector<float> ReadF32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

std::vector<int> ReadIds(const std::string& path) {
  std::ifstream f(path);
  nlohmann::json j = nlohmann::json::parse(f);
  return j.get<std::vector<int>>();
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

struct Diff {
  double max_abs = 0;
  double ref_abs = 0;
  double rel() const { return ref_abs > 0 ? max_abs / ref_abs : max_abs; }
};

Diff Compare(const std::vector<float>& got, const std::vector<float>& want) {
  Diff d;
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(got[i]) - want[i]));
    d.ref_abs = std::max(d.ref_abs, std::fabs(static_cast<double>(want[i])));
  }
  return d;
}

std::string Img(int i) { return kSet + (i == 0 ? "/images/photo_a.png" : "/images/photo_b.jpg"); }
std::string Extra(int i, const std::string& what) {
  return kSet + "/extra/img" + std::to_string(i) + "_" + what + ".f32";
}

TEST(VisionFixture, GridsMatchTheReference) {
  SKIP_WITHOUT_VISION_SET();
  nlohmann::json grids = ReadJson(kSet + "/extra/grids.json");
  nlohmann::json images = ReadJson(kSet + "/extra/images.json");
  for (int i = 0; i < 2; ++i) {
    Result<vision::ImageSize> s = vision::ProbeImageFile(Img(i));
    ASSERT_TRUE(s.has_value()) << s.error().message();
    auto g = vision::ChoosePatchGrid(s->width, s->height, 64);
    const nlohmann::json& gj = grids.is_array() ? grids[i] : grids["images"][i];
    EXPECT_EQ(g.rows, gj["grid_h"].get<int>());
    EXPECT_EQ(g.cols, gj["grid_w"].get<int>());
    EXPECT_EQ(g.tokens(), gj["tokens"].get<int>());
  }
}

TEST(VisionFixture, GridTableOfTheSpec) {
  struct Row { int sw, sh, m, gh, gw; };
  for (Row r : {Row{896, 896, 1024, 32, 32}, Row{1024, 768, 1024, 28, 36},
                Row{1920, 1080, 1024, 24, 42}, Row{354, 354, 1024, 24, 24},
                Row{100, 3000, 1024, 170, 6}, Row{10, 10, 1024, 2, 2}, Row{300, 200, 64, 6, 10},
                Row{45, 80, 64, 6, 2}, Row{150, 150, 100, 10, 10}, Row{123, 77, 48, 4, 8}}) {
    auto g = vision::ChoosePatchGrid(r.sw, r.sh, r.m);
    EXPECT_EQ(g.rows, r.gh) << r.sw << "x" << r.sh;
    EXPECT_EQ(g.cols, r.gw) << r.sw << "x" << r.sh;
  }
}

std::vector<float> OurPixels(int i) {
  Result<vision::RgbImage> img = vision::DecodeImageFile(Img(i));
  EXPECT_TRUE(img.has_value()) << img.error().message();
  if (!img) return {};
  auto g = vision::ChoosePatchGrid(img->width, img->height, 64);
  return vision::BuildPatches(*img, g, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f});
}

TEST(VisionFixture, PngPixelsAreExact) {
  SKIP_WITHOUT_VISION_SET();
  Diff d = Compare(OurPixels(0), ReadF32(Extra(0, "pixels")));
  EXPECT_EQ(d.max_abs, 0.0);
}

// Debian's stb_image is 2.27, the reference's 2.30: the JPEG decoder did
// not change between them for baseline files, so this is exact today; the
// bound is one 8-bit step (2/255 after normalisation to [-1, 1]).
TEST(VisionFixture, JpegPixelsWithinOneStep) {
  SKIP_WITHOUT_VISION_SET();
  Diff d = Compare(OurPixels(1), ReadF32(Extra(1, "pixels")));
  std::printf("jpeg pixel tensor max |diff| = %.9g\n", d.max_abs);
  EXPECT_LE(d.max_abs, 2.0 / 255.0 + 1e-6);
}

class TowerTest : public ::testing::TestWithParam<bool> {};

// Each stage from the reference's own pixel tensor (so the JPEG image
// checks the tower, not the decoder), on the baseline and the best kernels.
TEST_P(TowerTest, StagesMatchTheReference) {
  SKIP_WITHOUT_VISION_SET();
  const bool baseline = GetParam();
  Result<std::unique_ptr<Container>> c = Container::Open(kSet + "/container");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  Result<std::unique_ptr<vision::VisionContext>> v = vision::VisionContext::Open(**c);
  ASSERT_TRUE(v.has_value()) << v.error().message();
  kernels::KernelTable table = baseline ? kernels::BuildKernelTable(kernels::Isa::kBaseline)
                                        : kernels::ActiveKernels();
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(2, {});
  ASSERT_TRUE(pool.has_value());
  Ops ops(table, pool->get());
  const vision::PatchGrid grids[2] = {{6, 10}, {6, 2}};
  for (int i = 0; i < 2; ++i) {
    vision::TowerTrace trace;
    Result<std::vector<float>> e = (*v)->tower().Encode(ops, ReadF32(Extra(i, "pixels")), grids[i], &trace);
    ASSERT_TRUE(e.has_value()) << e.error().message();
    struct Stage { const char* name; const std::vector<float>* got; };
    for (Stage s : {Stage{"vis_embed", &trace.embed}, Stage{"vis_block0", &trace.blocks[0]},
                    Stage{"vis_encoder", &trace.encoder}, Stage{"vis_out", &*e}}) {
      Diff d = Compare(*s.got, ReadF32(Extra(i, s.name)));
      std::printf("%s img%d %s: max|diff| %.3g (max|ref| %.3g)\n", table.name.c_str(), i, s.name,
                  d.max_abs, d.ref_abs);
      EXPECT_LE(d.rel(), 1e-4) << "image " << i << " stage " << s.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, TowerTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "baseline" : "best"; });

std::unique_ptr<Engine> OpenVision(bool baseline) {
  Config cfg;
  cfg.vision = true;
  cfg.threads = 2;
  cfg.force_baseline_kernels = baseline;
  Result<std::unique_ptr<Engine>> e = Engine::Open(kSet + "/container", cfg);
  EXPECT_TRUE(e.has_value()) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

class EngineVisionTest : public ::testing::TestWithParam<bool> {};

TEST_P(EngineVisionTest, SplicedPromptLogitsAndGreedy) {
  SKIP_WITHOUT_VISION_SET();
  std::unique_ptr<Engine> e = OpenVision(GetParam());
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->has_vision());
  EXPECT_EQ(e->media_pad_id(), 730);
  Result<int> n0 = e->AddImage(Img(0));
  ASSERT_TRUE(n0.has_value()) << n0.error().message();
  Result<int> n1 = e->AddImage(Img(1));
  ASSERT_TRUE(n1.has_value()) << n1.error().message();
  EXPECT_EQ(*n0, 15);
  EXPECT_EQ(*n1, 3);
  Result<std::vector<int>> ids = e->ExpandImagePads(ReadIds(kSet + "/prompt_raw_ids.json"));
  ASSERT_TRUE(ids.has_value()) << ids.error().message();
  EXPECT_EQ(*ids, ReadIds(kSet + "/prompt_ids.json"));

  Result<std::span<const float>> logits = e->Eval(*ids);
  ASSERT_TRUE(logits.has_value()) << logits.error().message();
  std::vector<float> got(logits->begin(), logits->end());
  Diff d = Compare(got, ReadF32(kSet + "/logits_last.f32"));
  std::printf("%s: last logits max|diff| %.3g (max|ref| %.3g)\n", e->backend_name().c_str(),
              d.max_abs, d.ref_abs);
  EXPECT_LE(d.rel(), 1e-3);
  EXPECT_EQ(e->queued_images(), 0) << "a call that used image rows drops the queue";

  std::vector<int> greedy;
  std::vector<int> want = ReadJson(kSet + "/greedy16.json")["greedy16"].get<std::vector<int>>();
  for (size_t t = 0; t < want.size(); ++t) {
    int best = static_cast<int>(std::max_element(got.begin(), got.end()) - got.begin());
    greedy.push_back(best);
    Result<std::span<const float>> next = e->Eval(std::vector<int>{best});
    ASSERT_TRUE(next.has_value());
    got.assign(next->begin(), next->end());
  }
  EXPECT_EQ(greedy, want);
}

INSTANTIATE_TEST_SUITE_P(Kernels, EngineVisionTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "baseline" : "best"; });

// Feeding the expanded prompt one id per call: only the first image
// position gets an image row (the queue is dropped after that call), as
// the reference does; its logits are in the set.
TEST(EngineVision, OneTokenPerCallDropsTheQueue) {
  SKIP_WITHOUT_VISION_SET();
  std::unique_ptr<Engine> e = OpenVision(false);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->AddImage(Img(0)).has_value());
  ASSERT_TRUE(e->AddImage(Img(1)).has_value());
  std::vector<int> ids = ReadIds(kSet + "/prompt_ids.json");
  std::vector<float> got;
  for (int id : ids) {
    Result<std::span<const float>> l = e->Eval(std::vector<int>{id});
    ASSERT_TRUE(l.has_value());
    got.assign(l->begin(), l->end());
  }
  Diff d = Compare(got, ReadF32(kSet + "/extra/logits_last_one_token_per_call.f32"));
  EXPECT_LE(d.rel(), 1e-3);
}

TEST(EngineVision, GenerateMatchesGreedy) {
  SKIP_WITHOUT_VISION_SET();
  std::unique_ptr<Engine> e = OpenVision(false);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->AddImage(Img(0)).has_value());
  ASSERT_TRUE(e->AddImage(Img(1)).has_value());
  Result<std::vector<int>> ids = e->ExpandImagePads(ReadIds(kSet + "/prompt_raw_ids.json"));
  ASSERT_TRUE(ids.has_value());
  GenParams p;
  p.max_tokens = 16;
  std::vector<int> out;
  Result<FinishReason> st = e->Generate(*ids, p, [&](const TokenEvent& ev) {
    out.push_back(ev.token);
    return true;
  });
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_EQ(out, ReadJson(kSet + "/greedy16.json")["generate_temp0"].get<std::vector<int>>());
}

TEST(EngineVision, QueueRulesAndRefusals) {
  SKIP_WITHOUT_VISION_SET();
  std::unique_ptr<Engine> e = OpenVision(false);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->AddImage(Img(1)).has_value());
  // Pads and images must pair up.
  Result<std::vector<int>> bad = e->ExpandImagePads(std::vector<int>{720, 730, 730});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), Errc::kArg);
  // A call without a pad keeps the queue.
  ASSERT_TRUE(e->Eval(std::vector<int>{720, 5}).has_value());
  EXPECT_EQ(e->queued_images(), 1);
  e->ResetState();
  EXPECT_EQ(e->queued_images(), 1) << "ResetState keeps the queue";
  e->ClearImages();
  EXPECT_EQ(e->queued_images(), 0);
  for (int i = 0; i < kMaxQueuedImages; ++i) ASSERT_TRUE(e->AddImage(Img(1)).has_value());
  Result<int> over = e->AddImage(Img(1));
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code(), Errc::kArg);
}

TEST(EngineVision, OffMeansUnsupportedAndPlanShowsVision) {
  SKIP_WITHOUT_VISION_SET();
  Config cfg;
  cfg.threads = 1;
  Result<std::unique_ptr<Engine>> e = Engine::Open(kSet + "/container", cfg);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE((*e)->has_vision());
  Result<int> n = (*e)->AddImage(Img(0));
  ASSERT_FALSE(n.has_value());
  EXPECT_EQ(n.error().code(), Errc::kUnsupported);

  nlohmann::json mp = ReadJson(kSet + "/extra/memplan.json");
  Result<MemPlan> plan = PlanMemory(kSet + "/container", 4096);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->vision_bytes, mp["plan"]["vision_bytes"].get<uint64_t>());
  // Opened with vision, the plan's vision bytes are part of the scratch.
  std::unique_ptr<Engine> v = OpenVision(false);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->memory_used().scratch_bytes,
            (*e)->memory_used().scratch_bytes + plan->vision_bytes);
}


// A copy of the set's container with its manifest edited by `edit`.
std::string EditedContainer(const testing::TempDir& tmp,
                            const std::function<void(nlohmann::json&)>& edit,
                            bool drop_vision_json = false) {
  const std::string dir = tmp / "c";
  std::filesystem::create_directories(dir);
  for (const auto& e : std::filesystem::directory_iterator(kSet + "/container")) {
    const std::string name = e.path().filename().string();
    if (name == "manifest.json" || (drop_vision_json && name == "vision.json")) continue;
    std::filesystem::copy_file(e.path(), dir + "/" + name);
  }
  nlohmann::json m = ReadJson(kSet + "/container/manifest.json");
  edit(m);
  std::ofstream(dir + "/manifest.json") << m.dump();
  return dir;
}

nlohmann::json* Entry(nlohmann::json& m, const std::string& name) {
  for (auto& t : m["trunk"]) {
    if (t["name"] == name) return &t;
  }
  return nullptr;
}

Status OpenWithVision(const std::string& dir) {
  Config cfg;
  cfg.vision = true;
  cfg.threads = 1;
  Result<std::unique_ptr<Engine>> e = Engine::Open(dir, cfg);
  return e ? Status::Ok() : e.error();
}

// What the reference would misread is refused at open, naming the tensor.
TEST(EngineVision, MisreadableTowersAreRefusedAtOpen) {
  SKIP_WITHOUT_VISION_SET();
  struct Case {
    const char* tensor;
    std::function<void(nlohmann::json&)> change;
  };
  const Case cases[] = {
      // A norm with the wrong size (still inside trunk.bin).
      {"vision_tower.encoder.blocks.0.norm0.weight", [](nlohmann::json& t) { t["shape"] = {32}; }},
      // A quantized matrix stored with another 2-D shape of the same size.
      {"vision_tower.encoder.blocks.1.wqkv.weight", [](nlohmann::json& t) { t["shape"] = {96, 128}; }},
      // A quantized patch kernel that is not 2-D [D, 588].
      {"vision_tower.patch_embed.proj.weight", [](nlohmann::json& t) { t["shape"] = {64, 3, 196}; }},
  };
  for (const Case& c : cases) {
    testing::TempDir tmp;
    std::string dir = EditedContainer(tmp, [&](nlohmann::json& m) {
      nlohmann::json* t = Entry(m, c.tensor);
      ASSERT_NE(t, nullptr);
      c.change(*t);
    });
    Status st = OpenWithVision(dir);
    EXPECT_EQ(st.code(), Errc::kFormat) << c.tensor << ": " << st.message();
    EXPECT_NE(st.message().find(c.tensor), std::string::npos) << st.message();
    // Without vision the tower is never looked at.
    Config off;
    off.threads = 1;
    EXPECT_TRUE(Engine::Open(dir, off).has_value()) << c.tensor;
  }
  {
    testing::TempDir tmp;
    std::string dir = EditedContainer(tmp, [](nlohmann::json& m) {
      auto& trunk = m["trunk"];
      for (size_t i = 0; i < trunk.size(); ++i) {
        if (trunk[i]["name"] == "mm_projector.post_norm.weight") {
          trunk.erase(i);
          break;
        }
      }
    });
    Status st = OpenWithVision(dir);
    EXPECT_EQ(st.code(), Errc::kFormat);
    EXPECT_NE(st.message().find("mm_projector.post_norm.weight"), std::string::npos) << st.message();
  }
  {
    testing::TempDir tmp;
    std::string dir = EditedContainer(tmp, [](nlohmann::json&) {}, /*drop_vision_json=*/true);
    Status st = OpenWithVision(dir);
    EXPECT_EQ(st.code(), Errc::kFormat);
    EXPECT_NE(st.message().find("vision.json"), std::string::npos) << st.message();
  }
}

// An image run that ends the prompt past a whole prefill chunk: the
// position after it is an image row, fed by the one-token path.
TEST(EngineVision, ImageRowInTheOneTokenChunk) {
  SKIP_WITHOUT_VISION_SET();
  std::unique_ptr<Engine> e = OpenVision(false);
  ASSERT_TRUE(e);
  const std::string small = std::string(WASTE_SOURCE_DIR) + "/tests/data/images/rgb.png";
  std::vector<int> ids(static_cast<size_t>(kPrefillChunkTokens), 105);
  ids[0] = 720;
  ids.push_back(730);  // the first position after the chunk: one pad
  ASSERT_EQ(e->AddImage(small).value(), 1);  // 23x17 -> 2x2 grid -> 1 row
  Result<std::span<const float>> a = e->Eval(ids);
  ASSERT_TRUE(a.has_value());
  std::vector<float> spliced(a->begin(), a->end());
  e->ResetState();
  Result<std::span<const float>> b = e->Eval(ids);  // queue empty: the table's pad row
  ASSERT_TRUE(b.has_value());
  std::vector<float> plain(b->begin(), b->end());
  EXPECT_GT(Compare(spliced, plain).max_abs, 1e-3) << "the image row did not reach the last chunk";
}

}  // namespace
}  // namespace waste
