// waste::Verify: opens the container with the reader's full validation,
// re-reads every expert record (header checks and crc32) and decodes every
// trunk tensor (all values finite). With a source checkpoint it also
// compares every expert matrix and trunk tensor with the source and reports
// the relative Frobenius error of each, flagging outliers against the
// median of their group (per matrix kind; per trunk format).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/engine_env.h"
#include "container/container.h"
#include "convert/dequant.h"
#include "convert/residual_basis.h"
#include "convert/source_model.h"
#include "format/format.h"
#include "platform/platform.h"
#include "runtime/thread_pool.h"
#include "waste/convert.h"
#include "base/exception_status.h"

namespace waste {
namespace {

// Reconstruction limits that make a container unsound: far above what a
// correct encode gives (VQ3R ~0.2, Q4G ~0.1), below what a wrong book,
// scale or nibble order gives (~1).
double ExpertLimit(const ExpertQuant& q) { return q.stages <= 2 ? 0.45 : 0.32; }
double TrunkLimit(TensorFmt f) {
  return f == TensorFmt::kF32 ? 1e-6 : f == TensorFmt::kQ8G ? 0.03 : 0.25;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A problem with where it is, so the report lists them by layer, then
// expert (then matrix kind), as numbers: "expert 2" before "expert 10".
// Trunk problems come after every expert's, in the order found.
struct Problem {
  int layer = std::numeric_limits<int>::max();
  int expert = -1;
  int kind = -1;
  std::string text;
};

std::vector<std::string> InOrder(std::vector<Problem> problems) {
  std::stable_sort(problems.begin(), problems.end(), [](const Problem& a, const Problem& b) {
    return std::tie(a.layer, a.expert, a.kind) < std::tie(b.layer, b.expert, b.kind);
  });
  std::vector<std::string> out;
  for (Problem& p : problems) out.push_back(std::move(p.text));
  return out;
}

std::string Plural(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// A path that is no container at all is an error, not an unsound container:
// the user mistyped it or named the checkpoint, and "NOT sound — 0 records"
// would say neither.
Status CheckContainerDir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return IoError(fmt::format("no such directory: {}", dir));
  if (!std::filesystem::is_directory(dir, ec)) {
    return IoError(
        fmt::format("{} is a file; a container is a directory (the folder holding "
                    "manifest.json)",
                    dir));
  }
  if (!std::filesystem::exists(std::filesystem::path(dir) / "manifest.json", ec)) {
    return FormatError(fmt::format("not a waste container: {} (no manifest.json)", dir));
  }
  return Status::Ok();
}

Result<VerifyReport> Run(const VerifyOptions& o) {
  VerifyReport rep;
  WASTE_TRY(CheckContainerDir(o.container_dir));
  // A source that is no checkpoint is named before the container is judged.
  std::unique_ptr<convert::Checkpoint> ckpt;
  convert::SourceModel src;
  if (!o.source_dir.empty()) {
    WASTE_ASSIGN_OR_RETURN(ckpt, convert::Checkpoint::Open(o.source_dir));
    WASTE_ASSIGN_OR_RETURN(src, convert::DescribeSource(*ckpt));
  }
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  ContainerOptions co;
  co.verify_crc = true;
  co.direct_io = false;
  Result<std::unique_ptr<Container>> opened = Container::Open(o.container_dir, co);
  if (!opened) {
    rep.problems.push_back(opened.error().message());
    return rep;
  }
  const Container& c = **opened;
  const ModelConfig& cfg = c.config();
  const int threads =
      ResolveThreadCount(o.threads > 0 ? o.threads : ThreadsFromEnv(), platform::AllowedCpus());
  WASTE_ASSIGN_OR_RETURN(std::unique_ptr<ThreadPool> pool, ThreadPool::Create(threads));

  // A container written in a rotated residual basis is compared with its
  // source put into the same basis (manifest "residual_basis").
  convert::ResidualBasis basis;
  if (ckpt) {
    WASTE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(o.container_dir + "/manifest.json"));
    const nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
    if (m.is_object() && m.contains("residual_basis")) {
      const nlohmann::json& b = m["residual_basis"];
      if (!b.is_object() || !b.value("seed", nlohmann::json()).is_number_unsigned() ||
          !b.value("block", nlohmann::json()).is_number_integer()) {
        rep.problems.push_back("manifest.json: residual_basis is not {\"block\": N, \"seed\": S}");
        return rep;
      }
      WASTE_ASSIGN_OR_RETURN(basis, convert::ResidualBasis::Plan(*ckpt, src, cfg, b["seed"].get<uint64_t>()));
      if (!basis.enabled()) {
        rep.problems.push_back(fmt::format("manifest.json: residual_basis recorded, but this source cannot be "
                                           "rotated: {}",
                                           basis.why_not()));
        return rep;
      }
      if (basis.block() != b["block"].get<int>()) {
        rep.problems.push_back(fmt::format("manifest.json: residual_basis block {} is not the {} this source "
                                           "gives",
                                           b["block"].get<int>(), basis.block()));
        return rep;
      }
      rep.rotation_block = basis.block();
      log(fmt::format("residual stream rotated (Walsh-Hadamard blocks of {}): the source is compared in that "
                      "basis",
                      basis.block()));
    }
  }
  std::mutex mu;
  // (layer, expert) -> error, per kind: ordered as numbers.
  std::map<std::pair<int, int>, double> expert_err[3];
  std::vector<Problem> problems;

  // Experts.
  static const char* kKind[3] = {"gate", "up", "down"};
  for (int l = 0; l < cfg.n_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    const BankInfo& bank = c.bank(l);
    const platform::File& f = c.bank_file(l);
    size_t layer_problems = 0;
    pool->ParallelForDynamic(static_cast<size_t>(bank.experts), 1, [&](size_t b, size_t e_end) {
      std::vector<uint8_t> rec(static_cast<size_t>(bank.record_bytes));
      for (size_t e = b; e < e_end; ++e) {
        Status st = f.ReadAt(e * bank.record_bytes, rec.data(), rec.size());
        Result<ExpertRecordView> view = st.ok() ? c.ParseRecord(l, static_cast<int>(e), rec.data(), true)
                                                : Result<ExpertRecordView>(st);
        if (!view) {
          std::lock_guard<std::mutex> lock(mu);
          problems.push_back({l, static_cast<int>(e), -1, view.error().message()});
          ++layer_problems;
          continue;
        }
        if (!ckpt) continue;
        for (int k = 0; k < 3; ++k) {
          const std::string name = src.ExpertTensor(l, static_cast<int>(e), k);
          Result<convert::F32Tensor> w = convert::LoadF32(*ckpt, name, src.quant);
          if (w) {
            Status rotated = basis.ApplyToExpert(l, k, &*w);
            if (!rotated.ok()) w = Result<convert::F32Tensor>(rotated);
          }
          if (!w) {
            std::lock_guard<std::mutex> lock(mu);
            problems.push_back({l, static_cast<int>(e), k, w.error().message()});
            ++layer_problems;
            continue;
          }
          const int64_t rows = w->rows(), cols = w->cols();
          std::vector<float> out(static_cast<size_t>(cols));
          double err = 0, norm = 0;
          for (int64_t r = 0; r < rows; ++r) {
            c.DequantizeExpertRow(*view, k, static_cast<int>(r), out.data());
            const float* s = w->values.data() + r * cols;
            for (int64_t i = 0; i < cols; ++i) {
              const double d = static_cast<double>(s[i]) - out[i];
              err += d * d;
              norm += static_cast<double>(s[i]) * s[i];
            }
          }
          std::lock_guard<std::mutex> lock(mu);
          expert_err[k][{l, static_cast<int>(e)}] =
              norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
        }
      }
    });
    rep.records_checked += static_cast<uint64_t>(bank.experts);
    log(fmt::format("layer {}: {} read, {}", l,
                    Plural(static_cast<size_t>(bank.experts), "record", "records"),
                    Plural(layer_problems, "problem", "problems")));
  }

  // Trunk: decode every entry from trunk.bin.
  WASTE_ASSIGN_OR_RETURN(platform::File trunk, platform::File::Open(o.container_dir + "/trunk.bin"));
  std::map<std::string, std::string> target_to_source;
  for (const convert::TrunkSource& t : src.trunk) target_to_source[t.target] = t.source;
  std::map<TensorFmt, std::vector<std::pair<std::string, double>>> trunk_err;
  for (const TensorInfo& t : c.trunk_index()) {
    std::vector<uint8_t> bytes(static_cast<size_t>(t.bytes));
    WASTE_TRY(trunk.ReadAt(t.off, bytes.data(), bytes.size()));
    const format::TrunkGeometry g = format::ComputeTrunkGeometry(t.fmt, t.shape, t.group);
    std::vector<float> values(static_cast<size_t>(g.rows * g.cols));
    for (int64_t r = 0; r < g.rows; ++r) {
      float* out = values.data() + r * g.cols;
      if (t.fmt == TensorFmt::kF32) {
        std::memcpy(out, bytes.data() + r * g.cols * 4, static_cast<size_t>(g.cols) * 4);
        continue;
      }
      const uint8_t* row = bytes.data() + r * g.row_bytes;
      const uint8_t* sc = bytes.data() + (t.scale_off - t.off) + 2 * r * g.groups;
      for (int64_t i = 0; i < g.cols; ++i) {
        out[i] = static_cast<float>(format::TrunkCode(t.fmt, row, i)) *
                 format::F16ToF32(format::LoadU16(sc + 2 * (i / t.group)));
      }
    }
    ++rep.trunk_tensors_checked;
    if (std::any_of(values.begin(), values.end(), [](float v) { return !std::isfinite(v); })) {
      problems.push_back(
          {.text = fmt::format("trunk tensor {}: values that are not finite", t.name)});
      continue;
    }
    if (!ckpt) continue;
    auto it = target_to_source.find(t.name);
    if (it == target_to_source.end()) {
      problems.push_back(
          {.text = fmt::format("trunk tensor {}: no such tensor in the source", t.name)});
      continue;
    }
    WASTE_ASSIGN_OR_RETURN(convert::F32Tensor w, convert::LoadF32(*ckpt, it->second, src.quant));
    if (w.values.size() != values.size()) {
      problems.push_back({.text = fmt::format("trunk tensor {}: {} values, the source has {}",
                                              t.name, values.size(), w.values.size())});
      continue;
    }
    if (Status st = basis.ApplyToTrunk(t.name, &w); !st.ok()) {
      problems.push_back({.text = st.message()});
      continue;
    }
    double err = 0, norm = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const double d = static_cast<double>(w.values[i]) - values[i];
      err += d * d;
      norm += static_cast<double>(w.values[i]) * w.values[i];
    }
    trunk_err[t.fmt].emplace_back(t.name, norm > 0 ? std::sqrt(err / norm) : std::sqrt(err));
  }

  // Errors, outliers and limits. Outliers are judged per kind; the list
  // runs by layer, expert, kind.
  std::vector<double> all_expert;
  double median[3];
  for (int k = 0; k < 3; ++k) {
    std::vector<double> v;
    for (const auto& [where, e] : expert_err[k]) v.push_back(e);
    median[k] = Median(v);
    all_expert.insert(all_expert.end(), v.begin(), v.end());
  }
  std::map<std::tuple<int, int, int>, double> by_expert;
  for (int k = 0; k < 3; ++k) {
    for (const auto& [where, e] : expert_err[k]) by_expert[{where.first, where.second, k}] = e;
  }
  for (const auto& [where, e] : by_expert) {
    const auto [l, x, k] = where;
    const std::string n = fmt::format("layer {} expert {} {}", l, x, kKind[k]);
    rep.errors.push_back({n, e, e > o.outlier_factor * median[k]});
    if (e > ExpertLimit(cfg.quant)) {
      problems.push_back(
          {l, x, k,
           fmt::format("{}: relative error {:.4f} above {:.2f}", n, e, ExpertLimit(cfg.quant))});
    }
  }
  rep.expert_median_error = Median(all_expert);
  rep.expert_max_error = all_expert.empty() ? 0 : *std::max_element(all_expert.begin(), all_expert.end());
  for (const auto& [fmt_code, list] : trunk_err) {
    std::vector<double> v;
    for (const auto& p : list) v.push_back(p.second);
    const double med = Median(v);
    for (const auto& [n, e] : list) {
      const bool outlier = fmt_code != TensorFmt::kF32 && e > o.outlier_factor * med;
      rep.errors.push_back({n, e, outlier});
      rep.trunk_max_error = std::max(rep.trunk_max_error, e);
      if (e > TrunkLimit(fmt_code)) {
        problems.push_back(
            {.text = fmt::format("trunk tensor {} ({}): relative error {:.4f} above {:.2g}", n,
                                 TensorFmtName(fmt_code), e, TrunkLimit(fmt_code))});
      }
    }
  }
  rep.problems = InOrder(std::move(problems));
  rep.sound = rep.problems.empty();
  return rep;
}

}  // namespace

Result<VerifyReport> Verify(const VerifyOptions& options) noexcept {
  try {
    return Run(options);
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kIo, fmt::format("verify failed: {}", e.what()));
  }
}

}  // namespace waste
