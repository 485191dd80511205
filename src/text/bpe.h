// BytePairEncoder: tiktoken's byte-level BPE over a rank table (ENGINE.md
// §9.3). A piece that is itself a token is one id; otherwise start from
// single bytes and repeatedly merge the adjacent pair whose concatenation
// has the lowest rank (leftmost on ties) until no pair is a token. Exact for
// any length: short pieces use tiktoken's scan, long ones a heap over a
// linked list (O(n log n)); both give the same ids. Immutable after Build;
// safe for concurrent use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "waste/status.h"

namespace waste {

struct RankedToken {
  std::string bytes;
  int rank = 0;
};

class BytePairEncoder {
 public:
  // Ranks must be in [0, kMaxRank) and distinct, the byte strings non-empty
  // and distinct, and every single byte must be a token (so any input can be
  // encoded). Violations are kFormat errors naming the offending token.
  static constexpr int kMaxRank = 1 << 24;
  static Result<BytePairEncoder> Build(std::vector<RankedToken> tokens);

  // Appends the ranks for one piece to `out`.
  void Encode(std::string_view piece, std::vector<int>* out) const;

  // Which merge loop to run; kAuto picks by length. The others exist so
  // tests can prove the two loops agree.
  enum class Path { kAuto, kScan, kHeap };
  void EncodeWith(std::string_view piece, Path path, std::vector<int>* out) const;

  // The rank of a byte string, or -1.
  int Find(std::string_view bytes) const;
  // The bytes of a rank, empty when no token has it.
  std::string_view Bytes(int rank) const;
  // Number of tokens, and one past the highest rank.
  int size() const { return static_cast<int>(entries_.size()); }
  int rank_end() const { return static_cast<int>(by_rank_.size()); }

 private:
  struct Entry {
    uint32_t offset;
    uint32_t length;
    int rank;
  };
  void ScanMerge(std::string_view piece, std::vector<int>* out) const;
  void HeapMerge(std::string_view piece, std::vector<int>* out) const;
  static uint64_t Hash(std::string_view bytes);

  std::string arena_;            // every token's bytes, back to back
  std::vector<Entry> entries_;   // in input order
  std::vector<uint32_t> slots_;  // open addressing: entry index + 1, 0 = empty
  uint64_t slot_mask_ = 0;
  std::vector<int32_t> by_rank_;  // rank -> entry index, -1 = none
  int byte_rank_[256] = {};
};

}  // namespace waste
