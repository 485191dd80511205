#include "streaming/record_source.h"

namespace waste {

RecordSource ContainerRecords(const Container& container, bool verify_crc) {
  RecordSource s;
  const ModelConfig& cfg = container.config();
  s.layers = cfg.n_layers;
  s.experts = cfg.moe.n_experts;
  s.max_record_bytes = container.max_record_bytes();
  const Container* c = &container;
  s.locate = [c](int layer, int expert) {
    RecordLocation at;
    if (!c->is_moe_layer(layer)) return at;
    const BankInfo& bank = c->bank(layer);
    if (expert < 0 || expert >= bank.experts) return at;
    at.file = &c->bank_file(layer);
    at.offset = static_cast<uint64_t>(expert) * bank.record_bytes;
    at.bytes = bank.record_bytes;
    return at;
  };
  s.validate = [c, verify_crc](int layer, int expert, const uint8_t* record) {
    return c->CheckRecord(layer, expert, record, verify_crc);
  };
  return s;
}

}  // namespace waste
