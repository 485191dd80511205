// The `waste` binary with --image, as a user (and the conformance scripts)
// drive it: eval --ids RAW --image A --image B --logits-out F gives the
// reference's last logits; run ... -n 16 --temp 0 --json its greedy ids;
// a generated vision container works end to end; bad images and a
// container without a tower fail with the file named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/subprocess.h"
#include "container/container.h"
#include "kernels/kernel_table.h"
#include "runtime/ops.h"
#include "runtime/thread_pool.h"
#include "temp_dir.h"
#include "vision/image_decode.h"
#include "vision/preprocess.h"
#include "vision/vision_context.h"
#include "vision_fixture.h"
#include "waste/waste.h"

namespace waste {
namespace {

test::ProcessResult RunWaste(std::vector<std::string> args) {
  args.insert(args.begin(), WASTE_CLI_BINARY);
  auto p = test::Subprocess::Spawn(args, {"WASTE_THREADS=2"});
  EXPECT_TRUE(p);
  if (!p) return {};
  p->CloseStdin();
  EXPECT_TRUE(p->Wait(120));
  return p->result();
}

std::string RawIds() {
  std::ifstream f(kSet + "/prompt_raw_ids.json");
  std::vector<int> ids = nlohmann::json::parse(f).get<std::vector<int>>();
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

std::vector<float> ReadF32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

TEST(VisionCli, EvalLogitsMatchTheReference) {
  SKIP_WITHOUT_VISION_SET();
  testing::TempDir tmp;
  const std::string out = tmp / "logits.f32";
  test::ProcessResult r = RunWaste({"eval", kSet + "/container", "--ids", RawIds(), "--image",
                               kSet + "/images/photo_a.png", "--image",
                               kSet + "/images/photo_b.jpg", "--logits-out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("photo_a.png: 15 image tokens]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("photo_b.jpg: 3 image tokens]"), std::string::npos) << r.err;
  std::vector<float> got = ReadF32(out), want = ReadF32(kSet + "/logits_last.f32");
  ASSERT_EQ(got.size(), want.size());
  double diff = 0, ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    ref = std::max(ref, std::fabs(double(want[i])));
  }
  EXPECT_LE(diff, 1e-3 * ref);
}

TEST(VisionCli, RunGreedyMatchesTheReference) {
  SKIP_WITHOUT_VISION_SET();
  test::ProcessResult r = RunWaste({"run", kSet + "/container", "--ids", RawIds(), "--image",
                               kSet + "/images/photo_a.png", "--image",
                               kSet + "/images/photo_b.jpg", "-n", "16", "--temp", "0", "--json",
                               "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  std::ifstream f(kSet + "/greedy16.json");
  nlohmann::json want = nlohmann::json::parse(f);
  EXPECT_EQ(j["ids"], want["generate_temp0"]);
  EXPECT_EQ(j["prompt_tokens"].get<int>(), 69);
}

TEST(VisionCli, BadImagesAndNoTower) {
  SKIP_WITHOUT_VISION_SET();
  const std::string data = std::string(WASTE_SOURCE_DIR) + "/tests/data/images/";
  for (const char* bad : {"truncated.png", "huge_header.png", "not_an_image.txt", "rgb.ppm"}) {
    test::ProcessResult r =
        RunWaste({"eval", kSet + "/container", "--ids", "720,730", "--image", data + bad});
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  }
  // A text-only container: the reference's message.
  const std::string text_only = std::string(WASTE_FIXTURES_DIR) + "/warp-tiny/container";
  test::ProcessResult r = RunWaste({"eval", text_only, "--ids", "1,2", "--image", data + "rgb.png"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("rgb.png: this container has no vision tower"), std::string::npos) << r.err;
  // Pads and images must pair up.
  r = RunWaste({"eval", kSet + "/container", "--ids", "720,730,730", "--image", data + "rgb.png"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("2 media pad tokens but 1 image"), std::string::npos) << r.err;
}

// The suite's own small vision container (k3-tiny with a 36-patch tower).
void GenerateVisionContainer(const std::string& dir) {
  auto g = test::Subprocess::Spawn({WASTE_GEN_BINARY, dir, "--preset", "k3-tiny", "--tokenizer",
                                    "--seed", "7", "--vision", "32,2,48,64,2,4,6,36", "-q"});
  ASSERT_TRUE(g);
  g->CloseStdin();
  ASSERT_TRUE(g->Wait(120));
  ASSERT_EQ(g->result().exit_code, 0) << g->result().err;
}

// A vision container of the suite's own, from waste-gen --vision: a text
// prompt with an image in a chat turn runs, and the plan shows the tower.
TEST(VisionCli, GeneratedVisionContainer) {
  testing::TempDir tmp;
  const std::string dir = tmp / "k3v";
  ASSERT_NO_FATAL_FAILURE(GenerateVisionContainer(dir));
  const std::string img = std::string(WASTE_SOURCE_DIR) + "/tests/data/images/rgba.png";
  test::ProcessResult r = RunWaste({"run", dir, "describe", "--image", img, "-n", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 23x17 under 36 patches: grid 2x2 (upscaled), one image row.
  EXPECT_NE(r.err.find("rgba.png: 1 image tokens]"), std::string::npos) << r.err;
  test::ProcessResult p = RunWaste({"plan", dir});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("--image adds"), std::string::npos) << p.out;
  // The same container through chat: /image attaches to the next message.
  auto c = test::Subprocess::Spawn({WASTE_CLI_BINARY, "chat", dir, "--image", img, "-n", "2"},
                                   {"WASTE_THREADS=2"});
  ASSERT_TRUE(c);
  c->Write("first\n/image " + img + "\nsecond\n");
  c->CloseStdin();
  ASSERT_TRUE(c->Wait(120));
  EXPECT_EQ(c->result().exit_code, 0) << c->result().err;
  EXPECT_NE(c->result().out.find("attached to the next message"), std::string::npos)
      << c->result().out << c->result().err;
  size_t n = 0;
  for (size_t at = 0; (at = c->result().err.find("1 image tokens]", at)) != std::string::npos; ++at) ++n;
  EXPECT_EQ(n, 2u) << c->result().err;
}


// chat keeps a message's images with it: a turn kept across a full
// context is re-read with its image (ChatHistoryTest checks the state),
// and a message that is taken back leaves its images attached for the one
// sent again.
TEST(VisionCli, ChatKeepsImagesWithTheirMessages) {
  testing::TempDir tmp;
  const std::string dir = tmp / "k3v";
  ASSERT_NO_FATAL_FAILURE(GenerateVisionContainer(dir));
  const std::string img = std::string(WASTE_SOURCE_DIR) + "/tests/data/images/rgba.png";
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; ++at) ++n;
    return n;
  };

  // Without --image at start the tower is not loaded: /image says how to
  // get it (the container has one).
  auto no_tower = test::Subprocess::Spawn({WASTE_CLI_BINARY, "chat", dir, "-q"}, {"WASTE_THREADS=2"});
  ASSERT_TRUE(no_tower);
  no_tower->Write("/image " + img + "\n");
  no_tower->CloseStdin();
  ASSERT_TRUE(no_tower->Wait(120));
  EXPECT_NE(no_tower->result().out.find("images need the model opened with --image: restart chat "
                                        "with --image FILE"),
            std::string::npos)
      << no_tower->result().out;

  // A 96-token context: the third message drops the first turn and
  // re-reads the second, image and all (encoded again, not announced).
  auto c = test::Subprocess::Spawn(
      {WASTE_CLI_BINARY, "chat", dir, "--image", img, "--ctx", "96", "-n", "8"},
      {"WASTE_THREADS=2"});
  ASSERT_TRUE(c);
  c->Write("a\n/image " + img + "\nb\nmore words here please, and some more words to make it "
           "longer\n/stats\n");
  c->CloseStdin();
  ASSERT_TRUE(c->Wait(120));
  EXPECT_EQ(c->result().exit_code, 0) << c->result().err;
  EXPECT_NE(c->result().err.find("was full: dropped the 1 oldest turn"), std::string::npos)
      << c->result().err;
  EXPECT_EQ(count(c->result().err, "1 image tokens]"), 2u) << c->result().err;
  EXPECT_NE(c->result().out.find(", 2 turns, 1 oldest dropped"), std::string::npos)
      << c->result().out;

  // Every expert record of layer 1 damaged: each call fails, the message
  // is taken back and its image goes with the next one.
  {
    const std::string bank = dir + "/experts-L1.bin";
    std::ifstream in(bank, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    ASSERT_EQ(bytes.size() % 16, 0u);
    for (size_t r = 0; r < bytes.size(); r += bytes.size() / 16) bytes[r] = static_cast<char>(~bytes[r]);
    std::ofstream(bank, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto d = test::Subprocess::Spawn({WASTE_CLI_BINARY, "chat", dir, "--image", img, "-n", "2"},
                                   {"WASTE_THREADS=2"});
  ASSERT_TRUE(d);
  d->Write("first\nagain\n/stats\n");
  d->CloseStdin();
  ASSERT_TRUE(d->Wait(120));
  EXPECT_EQ(d->result().exit_code, 0) << d->result().err;
  EXPECT_EQ(count(d->result().err, "that message was not kept (the conversation is as before "
                                   "it); its image stays attached to the next message"),
            2u)
      << d->result().err;
  EXPECT_EQ(count(d->result().err, "1 image tokens]"), 2u) << d->result().err;
  EXPECT_NE(d->result().out.find(", 0 turns"), std::string::npos) << d->result().out;
}

// The tower on the suite's own containers against the independent numpy
// model (tools/oracle/vision_oracle.py): Q != D, head dims other than the
// public set's, position grids larger and smaller than the image grid and
// not square. Rows within 1e-4 x max|row value|.
TEST(VisionOracle, GeneratedTowersMatchTheNumpyModel) {
  if (std::system((std::string(WASTE_PYTHON) + " -c 'import numpy' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << WASTE_PYTHON << " has no numpy";
  }
  const std::string png = std::string(WASTE_FIXTURES_DIR) + "/warp-tiny-vision/images/photo_a.png";
  const std::string small = std::string(WASTE_SOURCE_DIR) + "/tests/data/images/rgb.png";
  struct Case {
    const char* spec;
    std::string image;
  };
  const Case cases[] = {
      {"32,2,48,64,2,4,6,100", png},     // grid 8x12 from a 4x6 position grid
      {"48,4,64,96,3,10,6,60", small},   // 2x2 grid from a 10x6 one
      {"32,2,32,64,1,8,8,64,f32", png},  // F32: 4-D patch kernel, 3-D position grid
      {"64,2,64,128,2,8,8,64,q4", png},  // Q4G matrices and grid
  };
  for (const Case& c : cases) {
    if (!std::filesystem::exists(c.image)) continue;
    testing::TempDir tmp;
    const std::string dir = tmp / "k3v";
    auto g = test::Subprocess::Spawn({WASTE_GEN_BINARY, dir, "--preset", "k3-tiny", "--tokenizer",
                                      "--seed", "11", "--vision", c.spec, "-q"});
    ASSERT_TRUE(g);
    g->CloseStdin();
    ASSERT_TRUE(g->Wait(120));
    ASSERT_EQ(g->result().exit_code, 0) << g->result().err;

    Result<vision::RgbImage> img = vision::DecodeImageFile(c.image);
    ASSERT_TRUE(img.has_value());
    const std::string rgb = tmp / "img.rgb", out = tmp / "oracle.f32";
    std::ofstream(rgb, std::ios::binary)
        .write(reinterpret_cast<const char*>(img->pixels()), static_cast<std::streamsize>(img->bytes()));
    auto o = test::Subprocess::Spawn({WASTE_PYTHON, std::string(WASTE_SOURCE_DIR) + "/tools/oracle/vision_oracle.py",
                                      dir, rgb, std::to_string(img->width),
                                      std::to_string(img->height), out});
    ASSERT_TRUE(o);
    o->CloseStdin();
    ASSERT_TRUE(o->Wait(120));
    ASSERT_EQ(o->result().exit_code, 0) << o->result().err;

    Config cfg;
    cfg.vision = true;
    cfg.threads = 2;
    Result<std::unique_ptr<Engine>> e = Engine::Open(dir, cfg);
    ASSERT_TRUE(e.has_value()) << e.error().message();
    Result<std::unique_ptr<Container>> ct = Container::Open(dir);
    ASSERT_TRUE(ct.has_value());
    Result<std::unique_ptr<vision::VisionContext>> v = vision::VisionContext::Open(**ct);
    ASSERT_TRUE(v.has_value()) << v.error().message();
    Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(2, {});
    ASSERT_TRUE(pool.has_value());
    Ops ops(kernels::ActiveKernels(), pool->get());
    const vision::VisionConfig& vc = (*v)->tower().config();
    vision::PatchGrid grid = vision::ChoosePatchGrid(img->width, img->height, vc.max_patches);
    Result<std::vector<float>> rows =
        (*v)->tower().Encode(ops, vision::BuildPatches(*img, grid, vc.mean, vc.std), grid);
    ASSERT_TRUE(rows.has_value()) << rows.error().message();
    std::vector<float> want = ReadF32(out);
    ASSERT_EQ(rows->size(), want.size()) << c.spec << " grid " << o->result().out;
    double diff = 0, ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      diff = std::max(diff, std::fabs(double((*rows)[i]) - want[i]));
      ref = std::max(ref, std::fabs(double(want[i])));
    }
    std::printf("%s grid %d x %d: max|diff| %.3g (max|ref| %.3g)\n", c.spec, grid.rows, grid.cols,
                diff, ref);
    EXPECT_LE(diff, 1e-4 * ref) << c.spec;
    // The engine's own path gives the same row count.
    Result<int> n = (*e)->AddImage(c.image);
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(static_cast<size_t>(*n) * static_cast<size_t>(vc.text_hidden), want.size());
  }
}

}  // namespace
}  // namespace waste
