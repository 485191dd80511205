// A Hugging Face `tokenizer.json` (byte-level BPE, as DeepSeek-V3/R1 ship
// it) turned into the container's tokenizer files: tokenizer.model (ranks =
// the release's ids, token bytes recovered from the byte-level alphabet),
// specials.json (every added token) and pretokenizer.json (the release's
// Split regexes, which the engine runs instead of Kimi's pattern). The JSON
// is untrusted: every field is checked and errors name it. A vocabulary
// whose merges rank-order BPE would not reproduce is refused, never
// converted into a tokenizer that silently splits differently
// (docs/CONVERT.md "Tokenizers from tokenizer.json" says why the check is
// sufficient).
#pragma once

#include <string>
#include <string_view>

#include "waste/status.h"

namespace waste::convert {

struct HfTokenizerFiles {
  std::string rank_file;          // tokenizer.model
  std::string specials_json;      // specials.json; empty when there are no added tokens
  std::string pretokenizer_json;  // pretokenizer.json
  int rank_tokens = 0;
  int special_tokens = 0;
  int merges = 0;
};

// `name` prefixes every message. `bos_id` (config.json's bos_token_id, or
// -1) is recorded in pretokenizer.json when it is one of the added tokens.
Result<HfTokenizerFiles> ConvertHfTokenizer(std::string_view json_text, const std::string& name,
                                            int bos_id);

}  // namespace waste::convert
