#include "text/bpe.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>

namespace waste {
namespace {

// Pieces up to this many bytes use tiktoken's quadratic scan, which beats
// the heap's bookkeeping on the short pieces that make up almost all text.
constexpr size_t kScanMax = 48;
constexpr int kNone = INT_MAX;

std::string Printable(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

uint64_t BytePairEncoder::Hash(std::string_view bytes) {
  // Most lookups are 2..16 bytes: read them with two (possibly overlapping)
  // loads instead of a byte loop; longer strings fold 8 bytes at a time.
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  const auto load64 = [](const unsigned char* q) {
    uint64_t v;
    std::memcpy(&v, q, 8);
    return v;
  };
  const auto load32 = [](const unsigned char* q) {
    uint32_t v;
    std::memcpy(&v, q, 4);
    return static_cast<uint64_t>(v);
  };
  uint64_t a = 0;
  uint64_t b = 0;
  if (n >= 8) {
    uint64_t h = 0;
    size_t i = 0;
    for (; i + 8 < n; i += 8) h = (h ^ load64(p + i)) * 0x9E3779B97F4A7C15ull + (h >> 29);
    a = h;
    b = load64(p + n - 8);
  } else if (n >= 4) {
    a = load32(p);
    b = load32(p + n - 4);
  } else if (n > 0) {
    a = (static_cast<uint64_t>(p[0]) << 16) | (static_cast<uint64_t>(p[n >> 1]) << 8) | p[n - 1];
  }
  uint64_t h =
      ((a ^ 0xA0761D6478BD642Full) * 0x9E3779B97F4A7C15ull) ^ ((b ^ n) * 0xE7037ED1A0B428DBull);
  h ^= h >> 32;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return h;
}

Result<BytePairEncoder> BytePairEncoder::Build(std::vector<RankedToken> tokens) {
  BytePairEncoder bpe;
  size_t total = 0;
  int max_rank = -1;
  for (const RankedToken& t : tokens) {
    if (t.bytes.empty()) {
      return FormatError("token with rank " + std::to_string(t.rank) + " has no bytes");
    }
    if (t.rank < 0 || t.rank >= kMaxRank) {
      return FormatError("rank " + std::to_string(t.rank) + " of token '" + Printable(t.bytes) +
                         "' is outside [0, " + std::to_string(kMaxRank) + ")");
    }
    total += t.bytes.size();
    max_rank = std::max(max_rank, t.rank);
  }
  if (total >= UINT32_MAX) return FormatError("token bytes exceed 4 GiB");
  bpe.arena_.reserve(total);
  bpe.entries_.reserve(tokens.size());
  bpe.by_rank_.assign(static_cast<size_t>(max_rank + 1), -1);
  size_t slots = 16;
  while (slots < tokens.size() * 2) slots *= 2;
  bpe.slots_.assign(slots, 0);
  bpe.slot_mask_ = slots - 1;
  for (const RankedToken& t : tokens) {
    const auto index = static_cast<uint32_t>(bpe.entries_.size());
    if (bpe.by_rank_[static_cast<size_t>(t.rank)] >= 0) {
      return FormatError("rank " + std::to_string(t.rank) + " is given to two tokens");
    }
    uint64_t slot = Hash(t.bytes) & bpe.slot_mask_;
    while (bpe.slots_[slot] != 0) {
      const Entry& e = bpe.entries_[bpe.slots_[slot] - 1];
      if (std::string_view(bpe.arena_).substr(e.offset, e.length) == t.bytes) {
        return FormatError("token '" + Printable(t.bytes) + "' appears twice (ranks " +
                           std::to_string(e.rank) + " and " + std::to_string(t.rank) + ")");
      }
      slot = (slot + 1) & bpe.slot_mask_;
    }
    bpe.slots_[slot] = index + 1;
    bpe.entries_.push_back(
        {static_cast<uint32_t>(bpe.arena_.size()), static_cast<uint32_t>(t.bytes.size()), t.rank});
    bpe.arena_ += t.bytes;
    bpe.by_rank_[static_cast<size_t>(t.rank)] = static_cast<int32_t>(index);
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    bpe.byte_rank_[b] = bpe.Find(std::string_view(&c, 1));
    if (bpe.byte_rank_[b] < 0) {
      static const char* kHex = "0123456789abcdef";
      return FormatError(std::string("byte 0x") + kHex[b >> 4] + kHex[b & 15] +
                         " has no token, so some text could not be encoded");
    }
  }
  return bpe;
}

int BytePairEncoder::Find(std::string_view bytes) const {
  uint64_t slot = Hash(bytes) & slot_mask_;
  while (true) {
    const uint32_t v = slots_[slot];
    if (v == 0) return -1;
    const Entry& e = entries_[v - 1];
    if (e.length == bytes.size() &&
        std::memcmp(arena_.data() + e.offset, bytes.data(), bytes.size()) == 0) {
      return e.rank;
    }
    slot = (slot + 1) & slot_mask_;
  }
}

std::string_view BytePairEncoder::Bytes(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= by_rank_.size()) return {};
  const int32_t index = by_rank_[static_cast<size_t>(rank)];
  if (index < 0) return {};
  const Entry& e = entries_[static_cast<size_t>(index)];
  return std::string_view(arena_).substr(e.offset, e.length);
}

void BytePairEncoder::Encode(std::string_view piece, std::vector<int>* out) const {
  EncodeWith(piece, Path::kAuto, out);
}

void BytePairEncoder::EncodeWith(std::string_view piece, Path path, std::vector<int>* out) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    out->push_back(byte_rank_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (const int whole = Find(piece); whole >= 0) {
    out->push_back(whole);
    return;
  }
  if (path == Path::kScan || (path == Path::kAuto && piece.size() <= kScanMax)) {
    ScanMerge(piece, out);
  } else {
    HeapMerge(piece, out);
  }
}

// tiktoken's loop: parts in an array; each round finds the lowest pair rank
// (strict <, so the leftmost wins ties), merges it and re-ranks the two
// pairs that changed.
void BytePairEncoder::ScanMerge(std::string_view piece, std::vector<int>* out) const {
  const size_t n = piece.size();
  // Stack buffers for the usual short piece; the heap only for tests that
  // force this loop on long input.
  uint32_t start_buf[kScanMax + 1];
  int tok_buf[kScanMax];
  int pair_buf[kScanMax];
  std::vector<uint32_t> start_vec;
  std::vector<int> tok_vec;
  std::vector<int> pair_vec;
  uint32_t* start = start_buf;
  int* tok = tok_buf;
  int* pair = pair_buf;
  if (n > kScanMax) {
    start_vec.resize(n + 1);
    tok_vec.resize(n);
    pair_vec.resize(n);
    start = start_vec.data();
    tok = tok_vec.data();
    pair = pair_vec.data();
  }
  auto rank_of = [&](size_t from, size_t to) {
    const int r = Find(piece.substr(from, to - from));
    return r < 0 ? kNone : r;
  };
  for (size_t k = 0; k < n; ++k) {
    start[k] = static_cast<uint32_t>(k);
    tok[k] = byte_rank_[static_cast<uint8_t>(piece[k])];
  }
  start[n] = static_cast<uint32_t>(n);
  for (size_t k = 0; k + 1 < n; ++k) pair[k] = rank_of(k, k + 2);
  pair[n - 1] = kNone;
  size_t m = n;  // live parts; start[m] == n always
  while (m > 1) {
    size_t best = 0;
    int best_rank = kNone;
    for (size_t k = 0; k + 1 < m; ++k) {
      if (pair[k] < best_rank) {
        best_rank = pair[k];
        best = k;
      }
    }
    if (best_rank == kNone) break;
    const size_t i = best;
    tok[i] = best_rank;
    // Drop part i + 1.
    std::copy(start + i + 2, start + m + 1, start + i + 1);
    std::copy(tok + i + 2, tok + m, tok + i + 1);
    std::copy(pair + i + 2, pair + m, pair + i + 1);
    --m;
    pair[i] = (i + 1 < m) ? rank_of(start[i], start[i + 2]) : kNone;
    if (i > 0) pair[i - 1] = rank_of(start[i - 1], start[i + 1]);
  }
  for (size_t k = 0; k < m; ++k) out->push_back(tok[k]);
}

// The same merges in O(n log n): parts form a linked list (a part keeps the
// index of its first byte), candidate pairs sit in a min-heap keyed by
// (rank, index) so the leftmost lowest rank pops first, and entries made
// stale by a merge are skipped when popped.
void BytePairEncoder::HeapMerge(std::string_view piece, std::vector<int>* out) const {
  const auto n = static_cast<uint32_t>(piece.size());
  std::vector<uint32_t> next(n);
  std::vector<int32_t> prev(n);
  std::vector<int> tok(n);
  std::vector<int> pair(n, -1);
  std::vector<uint64_t> heap;
  heap.reserve(n);
  const auto key = [](int rank, uint32_t i) { return (static_cast<uint64_t>(rank) << 32) | i; };
  // End of part i's right neighbour, or n when i is the last part.
  const auto pair_end = [&](uint32_t i) -> uint32_t {
    const uint32_t j = next[i];
    return j >= n ? n : next[j];
  };
  const auto rerank = [&](uint32_t i) {
    pair[i] = next[i] >= n ? -1 : Find(piece.substr(i, pair_end(i) - i));
    if (pair[i] >= 0) {
      heap.push_back(key(pair[i], i));
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (uint32_t i = 0; i < n; ++i) {
    next[i] = i + 1;
    prev[i] = static_cast<int32_t>(i) - 1;
    tok[i] = byte_rank_[static_cast<uint8_t>(piece[i])];
  }
  for (uint32_t i = 0; i + 1 < n; ++i) {
    pair[i] = Find(piece.substr(i, 2));
    if (pair[i] >= 0) heap.push_back(key(pair[i], i));
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto i = static_cast<uint32_t>(top & 0xFFFFFFFFu);
    const auto rank = static_cast<int>(top >> 32);
    if (!alive[i] || pair[i] != rank) continue;  // stale
    const uint32_t j = next[i];
    tok[i] = rank;
    alive[j] = false;
    next[i] = next[j];
    if (next[i] < n) prev[next[i]] = static_cast<int32_t>(i);
    rerank(i);
    if (prev[i] >= 0) rerank(static_cast<uint32_t>(prev[i]));
  }
  for (uint32_t i = 0; i < n; i = next[i]) out->push_back(tok[i]);
}

}  // namespace waste
