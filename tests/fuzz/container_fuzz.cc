// libFuzzer target over the container parsers that take untrusted bytes
// without touching the disk: ParseManifest (then the trunk index checks,
// required tensors, plan arithmetic) and the expert record header checks,
// with the fixture's geometry, a VQ4P one and the fuzzed manifest's own.
// Nothing here may crash, hang or trip a sanitizer, whatever the input.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "container/container.h"
#include "format/format.h"
#include "engine/memplan_internal.h"
#include "container/tensor_list.h"

namespace {

void CheckRecord(const uint8_t* data, size_t size, const waste::format::RecordLayout& layout,
                 int n_books) {
  // Records above 1 MiB are skipped: the parsing logic is the same.
  if (layout.record_bytes == 0 || layout.record_bytes > (1u << 20)) return;
  std::vector<uint8_t> record(layout.record_bytes, 0);
  std::memcpy(record.data(), data, std::min<size_t>(size, record.size()));
  uint16_t layer, expert;
  std::memcpy(&layer, record.data() + 4, 2);
  std::memcpy(&expert, record.data() + 6, 2);
  waste::format::RecordExpectation want;
  want.layer = layer;
  want.expert = expert;
  want.record_bytes = layout.record_bytes;
  want.codebook_base = 0;
  want.n_books = n_books;
  want.layout = &layout;
  if (waste::format::ValidateRecordHeader(record.data(), want).ok()) {
    (void)waste::format::VerifyRecordCrc(record.data(), layout);
    // A valid header promises in-bounds reads of every run.
    uint8_t s[8];
    for (int k = 0; k < 3; ++k) {
      const auto& m = layout.m[k];
      uint64_t last = waste::format::IndexRunOffset(layout, k, m.rows - 1, m.nv - 1);
      if (last + layout.run_bytes > layout.scales_off) __builtin_trap();
      waste::format::DecodeRun(layout, record.data() + last, s);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  waste::Result<waste::Manifest> m = waste::ParseManifest(text, "fuzz.json");
  if (m.has_value()) {
    (void)waste::ValidateTrunkIndex(*m, 1u << 20);
    (void)waste::ValidateRequiredTensors(*m);
    (void)waste::ResidentTrunkBytes(*m);
    (void)waste::CountParameters(*m);
    (void)waste::QuantizationSummary(*m);
    (void)waste::EstimateScratchBytes(m->config, 4096);
    (void)waste::StateBytes(m->config, 4096);
    if (m->config.moe.n_experts > 0) {
      auto layout = waste::format::ComputeRecordLayout(m->config.moe.inter, m->config.expert_in(),
                                                       m->config.quant);
      if (layout.has_value()) CheckRecord(data, size, *layout, 1 << 16);
    }
  }
  (void)waste::ParseManifestConfig(text, "fuzz.json");

  static const waste::format::RecordLayout kTiny =
      *waste::format::ComputeRecordLayout(64, 128, waste::ExpertQuant{3, 8, 256, 8, "VQ3R"});
  static const waste::format::RecordLayout kVq4p =
      *waste::format::ComputeRecordLayout(40, 136, waste::ExpertQuant{4, 8, 64, 6, "VQ4P"});
  static const waste::format::RecordLayout kSmall =
      *waste::format::ComputeRecordLayout(64, 128, waste::ExpertQuant{2, 8, 16, 8, "VQ2R"});
  CheckRecord(data, size, kTiny, 27);
  CheckRecord(data, size, kVq4p, 24);
  CheckRecord(data, size, kSmall, 12);
  return 0;
}
