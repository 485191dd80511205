#include "logprobs.h"

#include "chat_turn.h"

namespace waste::server {
namespace {

Json Bytes(std::string_view piece) {
  Json out = Json::array();
  for (char c : piece) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

// Characters (code points) of valid UTF-8 text.
int64_t Characters(std::string_view text) {
  int64_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

// Whether byte `next` carries on the unfinished character `tail` (a valid
// prefix of one, as CompleteUtf8Prefix leaves it).
bool ContinuesCharacter(const std::string& tail, char next) {
  const std::string s = tail + next;
  return CompleteUtf8Prefix(s) == 0 || SanitizeUtf8(s) == s;
}

// A completion token's spelling: its text, or, when the piece is not valid
// UTF-8 on its own (a character split across tokens), "bytes:" and each
// byte as \xNN, as OpenAI spells such tokens — so distinct byte pieces
// stay distinct keys of a top_logprobs map.
std::string Spelling(std::string_view piece) {
  std::string text = SanitizeUtf8(piece);
  if (text == piece) return text;
  static const char kHex[] = "0123456789abcdef";
  std::string out = "bytes:";
  for (char c : piece) {
    auto b = static_cast<unsigned char>(c);
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace

Json ChatLogprobEntry(const Engine& engine, int token, std::string_view piece, double logprob,
                      std::span<const TokenLogprob> top) {
  Json alternatives = Json::array();
  for (const TokenLogprob& t : top) {
    const std::string p = engine.TokenPiece(t.token);
    alternatives.push_back({{"token", SanitizeUtf8(p)}, {"logprob", t.logprob}, {"bytes", Bytes(p)}});
  }
  return {{"token", SanitizeUtf8(piece)},
          {"logprob", logprob},
          {"bytes", Bytes(piece)},
          {"top_logprobs", std::move(alternatives)}};
}

Json ChatLogprobs(Json content) { return {{"content", std::move(content)}, {"refusal", nullptr}}; }

void CompletionLogprobs::Add(int token, std::string_view piece, std::optional<double> logprob,
                             std::span<const TokenLogprob> top) {
  tokens_.push_back(Spelling(piece));
  // The index in the text as the reply spells it (each byte that is no
  // character's, U+FFFD): a token that starts inside a character split
  // across tokens points at that character; bytes left unfinished count
  // once a later byte shows they never will be.
  int64_t offset = done_chars_;
  if (!tail_.empty() && (piece.empty() || !ContinuesCharacter(tail_, piece[0]))) {
    offset += Characters(SanitizeUtf8(tail_));
  }
  text_offset_.push_back(offset);
  std::string pending = tail_ + std::string(piece);
  const size_t complete = CompleteUtf8Prefix(pending);
  done_chars_ += Characters(SanitizeUtf8(std::string_view(pending).substr(0, complete)));
  tail_ = pending.substr(complete);
  if (!logprob) {
    token_logprobs_.push_back(nullptr);
    top_logprobs_.push_back(nullptr);
    return;
  }
  token_logprobs_.push_back(*logprob);
  // Most likely first; a spelling two tokens share (rare: equal pieces)
  // keeps the likelier.
  Json map = Json::object();
  bool has_token = false;
  for (const TokenLogprob& t : top) {
    std::string key = Spelling(engine_.TokenPiece(t.token));
    if (!map.contains(key)) map[key] = t.logprob;
    has_token = has_token || t.token == token;
  }
  if (!has_token) {
    std::string key = Spelling(piece);
    if (!map.contains(key)) map[key] = *logprob;
  }
  top_logprobs_.push_back(std::move(map));
}

Json CompletionLogprobs::Take() {
  Json out = {{"tokens", std::move(tokens_)},
              {"token_logprobs", std::move(token_logprobs_)},
              {"top_logprobs", std::move(top_logprobs_)},
              {"text_offset", std::move(text_offset_)}};
  tokens_ = Json::array();
  token_logprobs_ = Json::array();
  top_logprobs_ = Json::array();
  text_offset_ = Json::array();
  return out;
}

}  // namespace waste::server
