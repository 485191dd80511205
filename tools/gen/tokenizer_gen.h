// A small text-capable tokenizer for synthetic containers: 256 byte tokens
// plus byte-pair merges learned from a built-in English text (so BPE really
// merges), the 11 K3-style specials after them, and a chat.json using them.
#pragma once

#include <string>
#include <vector>

namespace waste::gen {

struct GeneratedTokenizer {
  std::string tokenizer_model;   // tiktoken rank file (FORMAT.md §9.1)
  std::string specials_json;     // FORMAT.md §9.2
  std::string chat_json;         // FORMAT.md §9.3
  int n_ranks = 0;               // rank lines = BOS id
  int n_specials = 0;
  std::vector<std::string> tokens;  // bytes of every rank, for tests
  int vocab() const { return n_ranks + n_specials; }
};

// Learns up to `max_merges` merges (stopping when no pair repeats).
GeneratedTokenizer MakeTokenizer(int max_merges = 400);

// The training text (also handy as a tokenizer test input).
const std::string& TrainingText();

}  // namespace waste::gen
