// A restore point on disk: the engine's session file (the state at the
// point) beside a token file naming the tokens before it and the state's
// hash. Shared by the prompt cache's slot pairs (server/prompt_cache.cc)
// and its spilled points (server/point_store.h).
#pragma once

#include <string>
#include <vector>

#include "waste/waste.h"

namespace waste::server {

// FNV-1a over a file, streamed, as 16 hex digits: the token file names the
// state it belongs to by this, so a pair mixed up (two servers saving into
// one directory, files copied by hand) is refused instead of resuming the
// wrong tokens' state. "" when the file cannot be read.
std::string FileHash(const std::string& path);

// {"tokens": [ids], "state_fnv1a": "<16 hex digits>"}.
struct TokenFile {
  std::vector<int> ids;
  std::string state_hash;
};
// Read and checked: a JSON object, every id below `vocab`, at most about
// `ctx` ids' worth of text, a state hash. Says what is wrong with `path`.
Result<TokenFile> ReadTokenFile(const std::string& path, int vocab, uint32_t ctx);
// Written to a fresh temporary name and renamed over `path`.
Status WriteTokenFile(const std::string& path, const std::vector<int>& ids,
                      const std::string& state_hash);

void RemoveIfThere(const std::string& path);

}  // namespace waste::server
