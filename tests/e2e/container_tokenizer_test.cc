// ContainerTokenizer (include/waste/tokenizer.h): the container's tokenizer
// without the weights gives Model's ids and text, and refuses what
// Model::Open refuses (no tokenizer: kUnsupported; ids beyond the model's
// vocabulary: kFormat).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "waste/model.h"
#include "waste/tokenizer.h"

namespace waste {
namespace {

namespace fs = std::filesystem;

fs::path Generate(const std::string& name, const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("waste_ctok_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string cmd = std::string(WASTE_GEN_BINARY) + " " + dir.string() + " " + args + " -q > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

TEST(ContainerTokenizer, GivesTheModelsIdsAndText) {
  const fs::path dir = Generate("tok", "--preset tiny --tokenizer --seed 3");
  auto tok = ContainerTokenizer::Open(dir.string());
  ASSERT_TRUE(tok.has_value()) << tok.error().ToString();
  auto model = Model::Open(dir.string(), Config{});
  ASSERT_TRUE(model.has_value()) << model.error().ToString();
  for (bool markup : {false, true}) {
    for (const char* text : {"", "hello world", "<|im_end|> and <|im_user|> not plain", "ünï©ødé 🙂"}) {
      auto a = (*tok)->Tokenize(text, markup, /*add_bos=*/true);
      auto b = (*model)->Tokenize(text, markup, /*add_bos=*/true);
      ASSERT_TRUE(a.has_value() && b.has_value());
      EXPECT_EQ(*a, *b) << text;
      EXPECT_EQ(*(*tok)->Detokenize(*a), *(*model)->Detokenize(*b));
    }
  }
  EXPECT_EQ((*tok)->vocab_size(), (*model)->info().vocab);
  EXPECT_EQ((*tok)->bos_id(), (*model)->info().bos_id);
  EXPECT_EQ((*tok)->eos_id(), (*model)->info().eos_id);
  EXPECT_EQ((*tok)->TokenPiece(5), (*model)->TokenPiece(5));
  model->reset();
  fs::remove_all(dir);
}

TEST(ContainerTokenizer, RefusesWhatOpenRefuses) {
  const fs::path bare = Generate("bare", "--preset tiny --seed 3");
  auto none = ContainerTokenizer::Open(bare.string());
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), Errc::kUnsupported);
  EXPECT_NE(none.error().message().find("no tokenizer"), std::string::npos) << none.error().message();
  fs::remove_all(bare);

  auto missing = ContainerTokenizer::Open("/nonexistent/waste/container");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), Errc::kIo);

  // A specials.json id beyond the model's vocab_size: refused by both.
  const fs::path big = Generate("big", "--preset tiny --tokenizer --seed 3");
  {
    std::ofstream(big / "specials.json") << R"([{"id": 1000000, "text": "<|too_far|>"}])";
  }
  auto far = ContainerTokenizer::Open(big.string());
  ASSERT_FALSE(far.has_value());
  EXPECT_EQ(far.error().code(), Errc::kFormat);
  auto open = Model::Open(big.string(), Config{});
  ASSERT_FALSE(open.has_value());
  EXPECT_EQ(open.error().code(), Errc::kFormat);
  fs::remove_all(big);
}

}  // namespace
}  // namespace waste
