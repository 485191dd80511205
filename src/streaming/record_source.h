// Where the expert cache's records come from, and how one is checked on
// arrival. The cache deals in bytes and slots only: it asks a RecordSource
// where (layer, expert) lives (a file, an offset, a length) and hands the
// bytes that landed to its validation callback. The engine builds the
// source from its Container (ContainerRecords); the unit tests build one
// over a scratch file with a validator of their own, so the cache's
// replacement, pinning, hint and error paths are tested without a model.
#pragma once

#include <cstdint>
#include <functional>

#include "container/container.h"
#include "platform/platform.h"
#include "waste/status.h"

namespace waste {

struct RecordLocation {
  const platform::File* file = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;  // 0: there is no such record
};

struct RecordSource {
  int layers = 0;                 // layer ids are 0..layers-1
  int experts = 0;                // expert ids are 0..experts-1 (widest layer)
  uint64_t max_record_bytes = 0;  // 0: nothing to hold (a dense model)
  // Where (layer, expert) lives; bytes == 0 for a layer without experts or
  // an id past the layer's count. Called under the cache's lock: cheap and
  // thread-safe.
  std::function<RecordLocation(int layer, int expert)> locate;
  // Checks the record that arrived for (layer, expert) and returns views
  // into it, or the reason it is refused. The reason alone: the cache names
  // the record ("expert E of layer L: <reason>"). Called on reader threads
  // without the cache's lock, concurrently for different records.
  std::function<Result<ExpertRecordView>(int layer, int expert, const uint8_t* record)> validate;
};

// The container's expert banks: records at expert * record_bytes of each MoE
// layer's bank file, validated by Container::CheckRecord (crc32 too when
// `verify_crc`). `container` must outlive the source.
RecordSource ContainerRecords(const Container& container, bool verify_crc);

}  // namespace waste
