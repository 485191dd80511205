// Readers for the tokenizer's container files (FORMAT.md §9.1–9.2):
// tokenizer.model / tiktoken.model (one "<base64> <rank>" line per token)
// and specials.json (a JSON array of {"id", "text"}), and the optional
// pretokenizer.json (Split rules converted from a Hugging Face tokenizer). The bytes are
// untrusted: every malformed line or entry is a kFormat error naming the
// file and the line or entry, never skipped silently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/bpe.h"
#include "text/pretokenizer.h"
#include "waste/status.h"

namespace waste {

struct SpecialToken {
  int id = 0;
  std::string text;
};

// Parses a rank file's content. Blank lines (and a trailing CR) are
// ignored; `name` is used in messages.
Result<std::vector<RankedToken>> ParseRankFile(std::string_view content, std::string_view name);

// Parses specials.json (real JSON: escapes are decoded). Ids must be in
// [0, 2^31 - 1); texts non-empty; neither may repeat.
Result<std::vector<SpecialToken>> ParseSpecials(std::string_view content, std::string_view name);

// pretokenizer.json: {"splits": [{"pattern", "behavior", "invert"}...],
// "bos_id"?} (docs/FORMAT.md). 0..64 rules (none: each text is one piece), patterns 1..65536 bytes,
// behaviour one of Hugging Face's names; unknown keys are refused so a
// newer file is never half-understood. bos_id is -1 when absent.
struct PreTokenizerFile {
  std::vector<SplitRule> splits;
  int bos_id = -1;
};
Result<PreTokenizerFile> ParsePreTokenizerFile(std::string_view content, std::string_view name);

// Reads a whole regular file of at most `max_bytes` (waste/files.h). kIo
// when it cannot be read; `missing` is set (and the result is an error)
// when it does not exist.
Result<std::string> ReadWholeFile(const std::string& path, uint64_t max_bytes,
                                  std::string_view what, bool* missing);

}  // namespace waste
