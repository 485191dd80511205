#include "images.h"

#include <cstdio>

#include "waste/chat.h"

namespace waste::cli {
namespace {

// An image failure on stderr, naming the file once: the engine's messages
// already name it when the file is at fault ("no vision tower" does not).
void SayImageFailure(const std::string& path, const Status& st) {
  const std::string& m = st.message();
  const bool named = st.code() != Errc::kUnsupported && m.find(path) != std::string::npos;
  std::fprintf(stderr, "%s\n", (named ? "waste: " + m : path + ": " + m).c_str());
}

}  // namespace

bool HoldImages(const Engine& engine, const std::vector<std::string>& paths,
                std::vector<HeldImage>* held) {
  held->clear();
  for (const std::string& path : paths) {
    HeldImage h{path, {}, {}, 0};
    Result<std::vector<uint8_t>> bytes = ReadImageFile(path);
    Result<ImageDimensions> size =
        bytes.has_value() ? ProbeImageBytes(*bytes, path) : Result<ImageDimensions>(bytes.error());
    Result<int> rows = size.has_value() ? engine.ImageTokens(*size) : Result<int>(size.error());
    if (!rows.has_value()) {
      SayImageFailure(path, rows.error());
      return false;
    }
    h.bytes = std::move(bytes).value();
    h.size = *size;
    h.rows = *rows;
    held->push_back(std::move(h));
  }
  return true;
}

bool AttachHeldImages(Engine& engine, const std::vector<HeldImage>& held, bool announce) {
  for (const HeldImage& h : held) {
    Result<int> n = engine.AddImageBytes(h.bytes, h.name);
    if (!n.has_value()) {
      SayImageFailure(h.name, n.error());
      return false;
    }
    if (announce) std::fprintf(stderr, "[%s: %d image tokens]\n", h.name.c_str(), *n);
  }
  return true;
}

std::vector<std::string> MediaBlocksFor(const std::vector<HeldImage>& held) {
  std::vector<std::string> blocks;
  for (const HeldImage& h : held) blocks.push_back(MediaBlock(h.size.width, h.size.height));
  return blocks;
}

bool ExpandImagePads(Engine& engine, std::vector<int>* ids, const std::string& what) {
  if (engine.queued_images() == 0) return true;
  Result<std::vector<int>> expanded = engine.ExpandImagePads(*ids);
  if (!expanded.has_value()) {
    std::fprintf(stderr, "%s: %s\n", what.c_str(), expanded.error().message().c_str());
    return false;
  }
  *ids = std::move(expanded).value();
  return true;
}

}  // namespace waste::cli
