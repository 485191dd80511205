// GrammarMatcher: the set of parse stacks a prefix of the output can be
// in. States are interned and their transitions cached, so the trie walk
// of Mask() mostly costs one hash lookup per trie node.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "grammar/grammar_data.h"
#include "grammar/vocab_trie.h"

namespace waste {
namespace {

using Stack = std::vector<uint32_t>;

struct MatchState {
  std::vector<Stack> stacks;   // sorted, unique; an empty stack = complete
  uint32_t partial_cp = 0;     // bits of a character cut by a token boundary
  uint8_t partial_left = 0;    // continuation bytes still expected
  uint8_t partial_total = 0;   // length of that character in bytes
  int dist = 0;                // fewest bytes to the end
  bool can_end = false;
  bool can_continue = false;
};

constexpr int kMaxDepth = 512;

}  // namespace

struct GrammarMatcher::State {
  const GrammarData* g = nullptr;
  std::vector<MatchState> states;
  std::unordered_map<std::string, int> index;
  std::unordered_map<uint64_t, int> byte_next;
  std::unordered_map<uint64_t, int> token_next;
  std::vector<uint8_t> allowed;
  std::vector<uint8_t> is_end_token;
  int current = -1;
  bool dead = false;

  // Expands `s` until its top is a terminal; appends the results.
  void Expand(Stack s, std::vector<Stack>* out, int depth) {
    if (depth > kMaxDepth) return;  // left recursion: that path is dropped
    while (!s.empty() && g->elems[s.back()].type == ElemType::kEnd) s.pop_back();
    if (s.empty()) {
      out->push_back(std::move(s));
      return;
    }
    uint32_t pos = s.back();
    const GrammarElem& e = g->elems[pos];
    if (e.type != ElemType::kRuleRef) {
      out->push_back(std::move(s));
      return;
    }
    for (uint32_t alt : g->rule_alts[e.value]) {
      Stack n = s;
      n.back() = pos + 1;
      if (g->elems[pos + 1].type == ElemType::kEnd) n.pop_back();  // tail call
      n.push_back(alt);
      Expand(std::move(n), out, depth + 1);
    }
  }

  int Intern(MatchState st) {
    std::sort(st.stacks.begin(), st.stacks.end());
    st.stacks.erase(std::unique(st.stacks.begin(), st.stacks.end()), st.stacks.end());
    if (st.stacks.empty()) return -1;
    std::string key;
    key.reserve(16 + st.stacks.size() * 16);
    key.append(reinterpret_cast<const char*>(&st.partial_cp), 4);
    key.push_back(static_cast<char>(st.partial_left));
    key.push_back(static_cast<char>(st.partial_total));
    for (const Stack& s : st.stacks) {
      uint32_t n = static_cast<uint32_t>(s.size());
      key.append(reinterpret_cast<const char*>(&n), 4);
      key.append(reinterpret_cast<const char*>(s.data()), s.size() * 4);
    }
    auto it = index.find(key);
    if (it != index.end()) return it->second;
    st.dist = INT_MAX;
    for (const Stack& s : st.stacks) {
      long d = st.partial_left;
      for (uint32_t p : s) d += g->min_bytes_from[p];
      st.dist = static_cast<int>(std::min<long>(st.dist, std::min<long>(d, INT_MAX / 2)));
      if (s.empty()) st.can_end = true;
      else st.can_continue = true;
    }
    int id = static_cast<int>(states.size());
    states.push_back(std::move(st));
    index.emplace(std::move(key), id);
    return id;
  }

  int Start() {
    MatchState st;
    // The root rule as a one-element call.
    std::vector<Stack> out;
    for (uint32_t alt : g->rule_alts[g->root]) Expand(Stack{alt}, &out, 0);
    st.stacks = std::move(out);
    return Intern(std::move(st));
  }

  int ApplyChar(const MatchState& from, uint32_t cp) {
    MatchState st;
    for (const Stack& s : from.stacks) {
      if (s.empty()) continue;
      const GrammarElem& e = g->elems[s.back()];
      if (e.type != ElemType::kChars || !g->CharMatches(e, cp)) continue;
      Stack n = s;
      n.back() += 1;
      Expand(std::move(n), &st.stacks, 0);
    }
    return Intern(std::move(st));
  }

  int NextByte(int sid, uint8_t b) {
    uint64_t key = (static_cast<uint64_t>(sid) << 8) | b;
    auto it = byte_next.find(key);
    if (it != byte_next.end()) return it->second;
    const MatchState& from = states[static_cast<size_t>(sid)];
    int result = -1;
    if (from.partial_left == 0) {
      if (b < 0x80) {
        result = ApplyChar(from, b);
      } else if (b >= 0xc2 && b <= 0xf4) {  // C0, C1, F5.. never start valid UTF-8
        int n = (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : 3;
        result = Partial(from, b & (0x3fu >> n), static_cast<uint8_t>(n), static_cast<uint8_t>(n + 1));
      }
    } else if ((b & 0xc0) == 0x80 && SecondByteValid(from, b)) {
      uint32_t cp = (from.partial_cp << 6) | (b & 0x3fu);
      uint8_t left = static_cast<uint8_t>(from.partial_left - 1);
      MatchState copy;
      copy.stacks = states[static_cast<size_t>(sid)].stacks;
      result = left == 0 ? ApplyChar(copy, cp) : Partial(copy, cp, left, from.partial_total);
    }
    byte_next.emplace(key, result);
    return result;
  }

  // The first continuation byte after E0, ED, F0 or F4 is narrower
  // (no overlong forms, no surrogates, nothing past U+10FFFF).
  static bool SecondByteValid(const MatchState& from, uint8_t b) {
    const uint32_t bits = from.partial_cp;
    if (from.partial_left == 2 && bits == 0x0) return b >= 0xa0;   // after E0
    if (from.partial_left == 2 && bits == 0xd) return b <= 0x9f;   // after ED
    if (from.partial_left == 3 && bits == 0x0) return b >= 0x90;   // after F0
    if (from.partial_left == 3 && bits == 0x4) return b <= 0x8f;   // after F4
    return true;
  }

  // A character still missing `left` continuation bytes: keep the stacks
  // whose next class could still match it.
  int Partial(const MatchState& from, uint32_t bits, uint8_t left, uint8_t total) {
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t lo = std::max(bits << (6 * left), kMin[total]);
    uint32_t hi = std::min((bits << (6 * left)) | ((1u << (6 * left)) - 1), 0x10ffffu);
    MatchState st;
    st.partial_cp = bits;
    st.partial_left = left;
    st.partial_total = total;
    for (const Stack& s : from.stacks) {
      if (s.empty()) continue;
      const GrammarElem& e = g->elems[s.back()];
      if (e.type == ElemType::kChars && g->CharRangeMayMatch(e, lo, hi)) st.stacks.push_back(s);
    }
    return Intern(std::move(st));
  }

  int NextTokenTerminal(int sid, int token) {
    uint64_t key = (static_cast<uint64_t>(sid) << 32) | static_cast<uint32_t>(token);
    auto it = token_next.find(key);
    if (it != token_next.end()) return it->second;
    const MatchState& from = states[static_cast<size_t>(sid)];
    MatchState st;
    if (from.partial_left == 0) {
      for (const Stack& s : from.stacks) {
        if (s.empty()) continue;
        const GrammarElem& e = g->elems[s.back()];
        if (e.type != ElemType::kToken || e.value != static_cast<uint32_t>(token)) continue;
        Stack n = s;
        n.back() += 1;
        Expand(std::move(n), &st.stacks, 0);
      }
    }
    int result = Intern(std::move(st));
    token_next.emplace(key, result);
    return result;
  }

  // The state after `token`, or -1.
  int Next(int sid, int token, const Vocabulary::Impl& v) {
    int via_terminal = NextTokenTerminal(sid, token);
    if (via_terminal >= 0) return via_terminal;
    if (token < 0 || static_cast<size_t>(token) >= v.pieces.size() || v.opaque[static_cast<size_t>(token)]) return -1;
    const std::string& p = v.pieces[static_cast<size_t>(token)];
    if (p.empty()) return -1;
    int s = sid;
    for (char c : p) {
      s = NextByte(s, static_cast<uint8_t>(c));
      if (s < 0) return -1;
    }
    return s;
  }

  bool Permitted(int sid, int token, const Vocabulary::Impl& v, bool closing, int max_dist) {
    // Copies: Next() may grow `states`.
    const bool can_end = states[static_cast<size_t>(sid)].can_end;
    const int dist = states[static_cast<size_t>(sid)].dist;
    if (token >= 0 && static_cast<size_t>(token) < is_end_token.size() && is_end_token[static_cast<size_t>(token)]) {
      if (can_end) return true;
    }
    int n = Next(sid, token, v);
    if (n < 0) return false;
    const int next = states[static_cast<size_t>(n)].dist;
    // A limit already out of reach still lets the ending come closer.
    if (max_dist >= 0 && next > std::max(max_dist, dist - 1)) return false;
    return !closing || next < dist;
  }
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const Vocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), state_(std::make_unique<State>()) {
  state_->g = &grammar_->data();
  state_->current = state_->Start();
  state_->dead = state_->current < 0;
}

GrammarMatcher::~GrammarMatcher() = default;

void GrammarMatcher::SetEndTokens(std::vector<int> ids) noexcept {
  try {
    size_t n = vocab_ ? vocab_->impl().pieces.size() : 0;
    for (int id : ids) n = std::max(n, static_cast<size_t>(std::max(id, 0)) + 1);
    state_->is_end_token.assign(n, 0);
    for (int id : ids) if (id >= 0) state_->is_end_token[static_cast<size_t>(id)] = 1;
  } catch (...) {
    state_->is_end_token.clear();  // out of memory: no end token is special
  }
}

bool GrammarMatcher::Allows(int token) noexcept {
  if (state_->dead || !vocab_) return true;
  try {
    return state_->Permitted(state_->current, token, vocab_->impl(), closing_, max_dist_);
  } catch (...) {
    return true;
  }
}

void GrammarMatcher::Mask(std::span<float> logits) noexcept {
  if (state_->dead || !vocab_) return;
  try {
    State& st = *state_;
    const Vocabulary::Impl& v = vocab_->impl();
    const size_t n = logits.size();
    for (int pass = 0; pass < 2; ++pass) {
      bool closing = closing_ && pass == 0;
      const int cur = st.states[static_cast<size_t>(st.current)].dist;
      const int max_dist = pass == 0 && max_dist_ >= 0 ? std::max(max_dist_, cur - 1) : -1;
      st.allowed.assign(n, 0);
      size_t count = 0;
      const int cur_dist = st.states[static_cast<size_t>(st.current)].dist;
      auto allow = [&](int id, int next_state) {
        if (id < 0 || static_cast<size_t>(id) >= n || st.allowed[static_cast<size_t>(id)]) return;
        const int next_dist = st.states[static_cast<size_t>(next_state)].dist;
        if (closing && next_dist >= cur_dist) return;
        if (max_dist >= 0 && next_dist > max_dist) return;
        st.allowed[static_cast<size_t>(id)] = 1;
        ++count;
      };
      // Text tokens: one walk of the trie.
      std::vector<std::pair<uint32_t, int>> todo{{0u, st.current}};
      while (!todo.empty()) {
        auto [node, sid] = todo.back();
        todo.pop_back();
        for (uint32_t c = v.nodes[node].first_child; c != 0; c = v.nodes[c].next_sibling) {
          int ns = st.NextByte(sid, v.nodes[c].byte);
          if (ns < 0) continue;
          const TrieNode& cn = v.nodes[c];
          for (uint32_t k = 0; k < cn.token_count; ++k) allow(v.node_tokens[cn.token_begin + k], ns);
          if (cn.first_child) todo.emplace_back(c, ns);
        }
      }
      // Token terminals and end tokens.
      const std::vector<Stack> tops = st.states[static_cast<size_t>(st.current)].stacks;
      for (const Stack& s : tops) {
        if (s.empty()) continue;
        const GrammarElem& e = st.g->elems[s.back()];
        if (e.type == ElemType::kToken) {
          int ns = st.NextTokenTerminal(st.current, static_cast<int>(e.value));
          if (ns >= 0) allow(static_cast<int>(e.value), ns);
        }
      }
      if (st.states[static_cast<size_t>(st.current)].can_end) {
        for (size_t id = 0; id < st.is_end_token.size() && id < n; ++id) {
          if (st.is_end_token[id] && !st.allowed[id]) {
            st.allowed[id] = 1;
            ++count;
          }
        }
      }
      if (count == 0) continue;  // closing/the limit found nothing: retry without them
      const float kNeg = -std::numeric_limits<float>::infinity();
      for (size_t i = 0; i < n; ++i) {
        if (!st.allowed[i]) logits[i] = kNeg;
      }
      return;
    }
    // Nothing at all continues the grammar: leave the logits alone.
  } catch (...) {
  }
}

void GrammarMatcher::Accept(int token) noexcept {
  if (state_->dead || !vocab_) return;
  try {
    const bool can_end = state_->states[static_cast<size_t>(state_->current)].can_end;
    bool end = token >= 0 && static_cast<size_t>(token) < state_->is_end_token.size() &&
               state_->is_end_token[static_cast<size_t>(token)];
    int n = state_->Next(state_->current, token, vocab_->impl());
    if (n >= 0) {
      state_->current = n;
    } else if (!(end && can_end)) {
      state_->dead = true;
    }
  } catch (...) {
    state_->dead = true;
  }
}

bool GrammarMatcher::AcceptText(std::string_view bytes) noexcept {
  if (state_->dead) return false;
  try {
    int s = state_->current;
    for (char c : bytes) {
      s = state_->NextByte(s, static_cast<uint8_t>(c));
      if (s < 0) return false;
    }
    state_->current = s;
    return true;
  } catch (...) {
    return false;
  }
}

bool GrammarMatcher::CanEnd() const noexcept {
  return !state_->dead && state_->states[static_cast<size_t>(state_->current)].can_end &&
         state_->states[static_cast<size_t>(state_->current)].partial_left == 0;
}

bool GrammarMatcher::MustEnd() const noexcept {
  return CanEnd() && !state_->states[static_cast<size_t>(state_->current)].can_continue;
}

bool GrammarMatcher::Dead() const noexcept { return state_->dead; }

int GrammarMatcher::MinBytesToEnd() const noexcept {
  if (state_->dead) return 0;
  return state_->states[static_cast<size_t>(state_->current)].dist;
}

}  // namespace waste
