// SessionPool::SaveMarks / LoadMarks: the prompt cache (session_pool.h).
// A restore point costs a prefill of every token before it — minutes for a
// long agent system prompt on a model streaming its experts — so a server
// restart should not throw them away. Each slot's point is kept as the
// engine's own session file (validated on load like any session file:
// shape, container fingerprint, sizes) beside the token ids it covers.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "json_text.h"
#include "session_pool.h"
#include "waste/files.h"

namespace waste::server {
namespace {

std::string SlotPath(const std::string& dir, size_t i, const char* ext) {
  return (std::filesystem::path(dir) / ("slot-" + std::to_string(i) + ext)).string();
}

// FNV-1a over a file, streamed: the token file names the state it belongs
// to by this, so a pair mixed up (two servers saving into one directory,
// files copied by hand) is refused instead of resuming the wrong tokens'
// state. "" when the file cannot be read.
std::string FileHash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  uint64_t h = 0xcbf29ce484222325ull;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h = (h ^ static_cast<uint8_t>(buf[static_cast<size_t>(i)])) * 0x100000001b3ull;
    }
  }
  if (in.bad()) return {};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

struct TokenFile {
  std::vector<int> ids;
  std::string state_hash;
};

// A slot's token file: {"tokens": [ids], "state_fnv1a": "<16 hex digits>"}.
Result<TokenFile> ReadTokens(const std::string& path, int vocab, uint32_t ctx) {
  // At most ctx ids of up to 7 digits and a separator, plus the wrapper.
  const uint64_t limit = uint64_t{ctx} * 8 + 4096;
  Result<std::string> text = ReadRegularFile(path, limit, "token file");
  if (!text) return text.error();
  Json j;
  std::string err;
  if (!ParseJson(*text, &j, &err)) return FormatError(path + ": not JSON (" + err + ")");
  auto it = j.is_object() ? j.find("tokens") : j.end();
  if (it == j.end() || !it->is_array()) return FormatError(path + ": no \"tokens\" array");
  TokenFile file;
  file.ids.reserve(it->size());
  for (const Json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab) {
      return FormatError(path + ": token " + std::to_string(file.ids.size()) +
                         " is not an id below the vocabulary size " + std::to_string(vocab));
    }
    file.ids.push_back(v.get<int>());
  }
  auto hash = j.find("state_fnv1a");
  if (hash == j.end() || !hash->is_string()) {
    return FormatError(path + ": no \"state_fnv1a\" naming its state file");
  }
  file.state_hash = hash->get<std::string>();
  return file;
}

Status WriteTokens(const std::string& path, const std::vector<int>& ids,
                   const std::string& state_hash) {
  const Json file = {{"tokens", ids}, {"state_fnv1a", state_hash}};
  return ReplaceRegularFile(path, Dump(file, JsonStyle::kCompact), "token file");
}

void RemoveIfThere(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

}  // namespace

SessionPool::CacheReport SessionPool::SaveMarks(const std::string& dir) {
  CacheReport report;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    report.skipped.push_back(dir + ": cannot create the directory: " + ec.message());
    return report;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    const std::string state = SlotPath(dir, i, ".state"), tokens = SlotPath(dir, i, ".tokens.json");
    const std::string name = "slot-" + std::to_string(i);
    if (slot.held) {
      report.skipped.push_back(name + ": a request still runs on it");
      continue;
    }
    // The furthest point: the follow-on's when it has one (after a restart
    // the conversation's next turn is likelier than the same request sent
    // again), else, or when going back there fails, the request's.
    int mark = slot.ahead.empty() ? kRequestMark : kAheadMark;
    if (mark == kAheadMark && !slot.session->RewindToMark(kAheadMark).ok()) mark = kRequestMark;
    const std::vector<int>& kept = mark == kAheadMark ? slot.ahead : slot.tokens;
    // A pair this server could not load (another model's, say) is left as
    // it was unless the slot has a point of its own to put there.
    if (kept.empty() && slot.cache_skipped) continue;
    // The token file goes first and comes back last: a pair is complete
    // only when both are written, and a crash in between leaves a state
    // without tokens (skipped on load), never tokens naming the wrong state.
    RemoveIfThere(tokens);
    if (kept.empty()) {
      RemoveIfThere(state);
      continue;
    }
    Status st = mark == kAheadMark ? Status::Ok() : slot.session->RewindToMark(kRequestMark);
    if (st.ok()) st = slot.session->SaveState(state);
    std::string hash;
    if (st.ok()) {
      hash = FileHash(state);
      if (hash.empty()) st = IoError("cannot read back " + state);
    }
    if (st.ok()) st = WriteTokens(tokens, kept, hash);
    if (!st.ok()) {
      report.skipped.push_back(name + ": " + st.ToString());
      continue;
    }
    ++report.conversations;
    report.tokens += kept.size();
  }
  return report;
}

SessionPool::CacheReport SessionPool::LoadMarks(const std::string& dir) {
  CacheReport report;
  const int vocab = engine_.info().vocab;
  const uint32_t ctx = engine_.info().ctx_tokens;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    const std::string state = SlotPath(dir, i, ".state"), tokens = SlotPath(dir, i, ".tokens.json");
    const std::string name = "slot-" + std::to_string(i);
    std::error_code ec;
    if (!std::filesystem::exists(tokens, ec)) continue;  // nothing kept for this slot
    auto skip = [&](const std::string& why) {
      slot.session->Reset();
      (void)slot.session->SetMark(kRequestMark);  // back to an empty mark, as Create left it
      slot.tokens.clear();
      slot.ahead.clear();
      slot.cache_skipped = true;
      report.skipped.push_back(name + ": " + why);
    };
    Result<TokenFile> file = ReadTokens(tokens, vocab, ctx);
    if (!file) {
      skip(file.error().message());
      continue;
    }
    const std::vector<int>& ids = file->ids;
    if (FileHash(state) != file->state_hash) {
      skip(state + " is not the state " + tokens + " was saved with (missing, or another save's)");
      continue;
    }
    if (ids.empty() || ids.size() % kChunk != 0 || ids.size() >= ctx) {
      skip(tokens + ": " + std::to_string(ids.size()) +
           " tokens is not a restore point (a positive multiple of " + std::to_string(kChunk) +
           " below the context, " + std::to_string(ctx) + ")");
      continue;
    }
    if (Status st = slot.session->LoadState(state); !st.ok()) {
      skip(st.ToString());
      continue;
    }
    if (slot.session->position() != static_cast<int>(ids.size())) {
      skip(state + " holds " + std::to_string(slot.session->position()) + " positions but " +
           tokens + " lists " + std::to_string(ids.size()) + " tokens");
      continue;
    }
    if (Status st = slot.session->SetMark(kRequestMark); !st.ok()) {
      skip(st.ToString());
      continue;
    }
    slot.tokens = std::move(file->ids);
    slot.ahead.clear();
    ++report.conversations;
    report.tokens += slot.tokens.size();
  }
  return report;
}

}  // namespace waste::server
