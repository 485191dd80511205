// libFuzzer target: a Hugging Face tokenizer.json as `waste convert` reads
// it (ConvertHfTokenizer). Either an error, or a rank file with one line per
// rank token and a pretokenizer.json that the engine's parser accepts.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "convert/hf_tokenizer.h"
#include "text/tokenizer_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto files = waste::convert::ConvertHfTokenizer(text, "tokenizer.json", 0);
  if (!files) return 0;
  auto ranks = waste::ParseRankFile(files->rank_file, "tokenizer.model");
  if (!ranks || static_cast<int>(ranks->size()) != files->rank_tokens) __builtin_trap();
  if (files->rank_tokens < 256) __builtin_trap();
  auto side = waste::ParsePreTokenizerFile(files->pretokenizer_json, "pretokenizer.json");
  if (!side) __builtin_trap();
  if (!files->specials_json.empty() && !waste::ParseSpecials(files->specials_json, "specials.json")) __builtin_trap();
  return 0;
}
