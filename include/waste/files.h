// How waste reads the files a user can name: the one rule for the library
// and the CLI (docs/HARDENING.md). Only regular files are read (never a
// directory, FIFO, device or socket, and a FIFO cannot block the open), and
// each kind has a size limit checked before reading; nothing past it is
// read. These limits bound the memory parsing can take.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "waste/export.h"
#include "waste/status.h"

namespace waste {

// manifest.json. A real manifest is well under 2 MiB (a trunk entry is
// ~110 bytes; even a 2.8T-parameter model has a few thousand). Parsing the
// worst 8 MiB manifest peaks near 150 MB (docs/HARDENING.md).
inline constexpr uint64_t kMaxManifestBytes = uint64_t{8} << 20;
// chat.json, specials.json and other small JSON sidecars.
inline constexpr uint64_t kMaxSidecarBytes = uint64_t{4} << 20;
// tokenizer.model / tiktoken.model (a 160K-rank file is ~2.5 MiB).
inline constexpr uint64_t kMaxTokenizerBytes = uint64_t{64} << 20;
// usage.waste: a 16-byte header and 16 bytes per record, 1M records.
inline constexpr uint64_t kMaxHotlistBytes = 16 + (uint64_t{16} << 20);
// A prompt given with --file.
inline constexpr uint64_t kMaxPromptFileBytes = uint64_t{256} << 20;
// A session file's limit is its exact size, known from its header.

// Reads the whole regular file `path` of at most `max_bytes`; `what` names
// the kind in errors ("prompt file"). `missing` is set when it does not exist.
WASTE_EXPORT Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                    std::string_view what, bool* missing = nullptr) noexcept;

// Writes `bytes` as the whole of `path` or leaves it as it was: a fresh
// temporary file beside it (created exclusively), flushed to disk, renamed
// over `path`. What is already at `path` must be nothing or a regular file
// (never a directory, link or device). `what` names the kind in errors.
WASTE_EXPORT Status ReplaceRegularFile(const std::string& path, std::string_view bytes,
                                       std::string_view what) noexcept;

}  // namespace waste
