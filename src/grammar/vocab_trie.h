// Vocabulary internals (see waste/grammar.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "waste/grammar.h"

namespace waste {

struct TrieNode {
  uint32_t first_child = 0;   // 0 = none (the root is never a child)
  uint32_t last_child = 0;
  uint32_t next_sibling = 0;
  uint32_t token_begin = 0;   // tokens whose piece ends here: node_tokens[begin, begin+count)
  uint32_t token_count = 0;
  uint8_t byte = 0;
};

struct Vocabulary::Impl {
  std::vector<std::string> pieces;
  std::vector<uint8_t> opaque;   // 1 = never matched as text
  std::vector<TrieNode> nodes;   // nodes[0] = root
  std::vector<int> node_tokens;
};

}  // namespace waste
