// The vocabulary as a byte trie: Mask() walks it once per step, carrying
// the grammar state along each edge, so a prefix shared by thousands of
// tokens is matched once.
#include <algorithm>
#include <numeric>

#include "grammar/vocab_trie.h"
#include "waste/engine.h"
#include "waste/model.h"

namespace waste {

Vocabulary::Vocabulary(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Vocabulary::~Vocabulary() = default;

std::shared_ptr<const Vocabulary> Vocabulary::Build(std::vector<std::string> pieces,
                                                    std::vector<int> opaque_tokens) noexcept {
  try {
    auto impl = std::make_unique<Impl>();
    impl->pieces = std::move(pieces);
    impl->opaque.assign(impl->pieces.size(), 0);
    for (int id : opaque_tokens) {
      if (id >= 0 && static_cast<size_t>(id) < impl->opaque.size()) impl->opaque[static_cast<size_t>(id)] = 1;
    }
    std::vector<int> order(impl->pieces.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return impl->pieces[static_cast<size_t>(a)] < impl->pieces[static_cast<size_t>(b)];
    });
    TrieNode root;
    impl->nodes.push_back(root);
    // Sorted insertion: the path of the previous piece is the only one
    // that can share a prefix, so children are appended in byte order.
    std::vector<uint32_t> path{0};
    std::string prev;
    std::vector<std::vector<int>> tokens_at(1);
    for (int id : order) {
      const std::string& p = impl->pieces[static_cast<size_t>(id)];
      if (impl->opaque[static_cast<size_t>(id)] || p.empty()) continue;
      size_t common = 0;
      while (common < p.size() && common < prev.size() && p[common] == prev[common]) ++common;
      path.resize(common + 1);
      for (size_t i = common; i < p.size(); ++i) {
        uint32_t parent = path.back();
        TrieNode n;
        n.byte = static_cast<uint8_t>(p[i]);
        uint32_t idx = static_cast<uint32_t>(impl->nodes.size());
        // link as the last child of parent
        if (impl->nodes[parent].first_child == 0) {
          impl->nodes[parent].first_child = idx;
        } else {
          impl->nodes[impl->nodes[parent].last_child].next_sibling = idx;
        }
        impl->nodes[parent].last_child = idx;
        impl->nodes.push_back(n);
        tokens_at.emplace_back();
        path.push_back(idx);
      }
      tokens_at[path.back()].push_back(id);
      prev = p;
    }
    for (size_t i = 0; i < impl->nodes.size(); ++i) {
      impl->nodes[i].token_begin = static_cast<uint32_t>(impl->node_tokens.size());
      impl->nodes[i].token_count = static_cast<uint32_t>(tokens_at[i].size());
      impl->node_tokens.insert(impl->node_tokens.end(), tokens_at[i].begin(), tokens_at[i].end());
    }
    return std::make_shared<const Vocabulary>(std::move(impl));
  } catch (...) {
    return nullptr;
  }
}

std::shared_ptr<const Vocabulary> Vocabulary::FromEngine(const Engine& engine,
                                                         std::vector<int> opaque_tokens) noexcept {
  return FromModel(engine.model(), std::move(opaque_tokens));
}

std::shared_ptr<const Vocabulary> Vocabulary::FromModel(const Model& model,
                                                        std::vector<int> opaque_tokens) noexcept {
  try {
    std::vector<std::string> pieces(static_cast<size_t>(std::max(0, model.info().vocab)));
    for (size_t i = 0; i < pieces.size(); ++i) pieces[i] = model.TokenPiece(static_cast<int>(i));
    return Build(std::move(pieces), std::move(opaque_tokens));
  } catch (...) {
    return nullptr;
  }
}

}  // namespace waste
