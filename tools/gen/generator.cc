#include "generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <optional>
#include <vector>

#include "writer/container_writer.h"
#include "format/format.h"
#include "platform/platform.h"
#include "presets.h"
#include "rng.h"
#include "router_bias.h"
#include "container/tensor_list.h"
#include "tokenizer_gen.h"
#include "vision_gen.h"

#ifndef WASTE_DEFAULT_TRACE
#define WASTE_DEFAULT_TRACE ""
#endif

namespace waste::gen {
namespace {

using OJson = nlohmann::ordered_json;

bool Has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// Stored format per tensor, as the reference generator does (FORMAT.md §4.6):
// Q8G embedding and head, Q4G every other matrix, F32 the rest.
TensorFmt FormatFor(const TensorSpec& s) {
  if (s.kind != TensorKind::kMatrix) return TensorFmt::kF32;
  if (s.name.ends_with("embed_tokens.weight") || s.name == "lm_head.weight") return TensorFmt::kQ8G;
  return TensorFmt::kQ4G;
}

// Values by role. Matrices keep activations near unit scale (uniform with
// std 1/sqrt(in)); norms sit near 1; the rest is small noise.
void FillRow(const std::string& name, int64_t cols, int64_t in_dim, Rng& rng, float* out) {
  auto uniform = [&](float lo, float hi) {
    for (int64_t i = 0; i < cols; ++i) out[i] = rng.Uniform(lo, hi);
  };
  if (name.ends_with("embed_tokens.weight")) {
    rng.FillUniform(out, static_cast<size_t>(cols), 1.0f);
  } else if (Has(name, "_res_proj")) {
    uniform(-0.1f, 0.1f);
  } else if (Has(name, "norm.weight") || Has(name, "layernorm.weight")) {
    uniform(0.9f, 1.1f);
  } else if (Has(name, "conv1d")) {
    uniform(-0.5f, 0.5f);
  } else if (name.ends_with("A_log")) {
    for (int64_t i = 0; i < cols; ++i) out[i] = std::log(rng.Uniform(1.0f, 16.0f));
  } else if (name.ends_with("dt_bias")) {
    uniform(-0.5f, 0.5f);
  } else if (name.ends_with("e_score_correction_bias")) {
    uniform(-0.05f, 0.05f);
  } else {
    rng.FillUniform(out, static_cast<size_t>(cols),
                    std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(in_dim, 1))));
  }
}

struct Skew {
  std::optional<RoutingTrace> trace;
  std::string note;
  std::vector<float> pending_bias;   // fitted with the router, written next
  double share_target = 0, share_fit = 0;  // top-10% experts' share of picks
  int layers = 0;
};

double TopShare(std::vector<double> f) {
  std::sort(f.begin(), f.end(), std::greater<>());
  size_t top = std::max<size_t>(1, f.size() / 10);
  double all = 0, head = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    all += f[i];
    if (i < top) head += f[i];
  }
  return all > 0 ? head / all : 0;
}

Status WriteTrunk(ContainerWriter& w, const Preset& preset, uint64_t seed, Skew& skew) {
  const ModelConfig& c = w.config();
  const int n_moe = c.n_moe_layers();
  int moe_index = 0;
  for (TensorSpec spec : ModelTensors(c)) {
    if (!preset.router_bias && spec.name.ends_with("e_score_correction_bias")) continue;
    if (preset.pad_a_log && spec.name.ends_with("A_log")) {
      // K3 pads A_log (96 heads -> 128): next power of two above the heads.
      int64_t padded = 1;
      while (padded <= c.kda.heads) padded *= 2;
      spec.shape = {1, 1, padded, 1};
    }
    const std::string full = PrefixedName(c, spec.name);
    const TensorFmt fmt = FormatFor(spec);
    const int64_t cols = spec.shape.back();
    const int64_t in_dim = spec.kind == TensorKind::kMatrix ? spec.shape[1] : cols;

    if (skew.trace && spec.name.ends_with("block_sparse_moe.gate.weight")) {
      // Router and its bias together: the bias is fitted to the real rows.
      const int e = c.moe.n_experts;
      std::vector<float> router(static_cast<size_t>(e) * c.hidden);
      Rng rng(seed, full);
      for (int r = 0; r < e; ++r) {
        FillRow(full, c.hidden, c.hidden, rng, router.data() + static_cast<size_t>(r) * c.hidden);
      }
      // Inputs are RMS-normalised (unit rms per component), so a router
      // logit has standard deviation |w_e|.
      std::vector<float> logit_std(static_cast<size_t>(e));
      for (int r = 0; r < e; ++r) {
        double ss = 0;
        for (int i = 0; i < c.hidden; ++i) {
          double v = router[static_cast<size_t>(r) * c.hidden + i];
          ss += v * v;
        }
        logit_std[r] = static_cast<float>(std::sqrt(ss));
      }
      std::vector<double> target = TargetFrequencies(*skew.trace, moe_index, n_moe, e, c.moe.top_k);
      std::vector<double> fit;
      if (!w.dry_run()) {
        skew.pending_bias = FitRouterBias(target, logit_std, c.moe.top_k,
                                          seed ^ (0x5EEDull + static_cast<uint64_t>(moe_index)), &fit);
        skew.share_target += TopShare(target);
        skew.share_fit += TopShare(fit);
        ++skew.layers;
      }
      ++moe_index;
      WASTE_TRY(w.AddTensor(full, fmt, spec.shape, router));
      continue;
    }
    if (!skew.pending_bias.empty() && spec.name.ends_with("e_score_correction_bias")) {
      WASTE_TRY(w.AddTensor(full, TensorFmt::kF32, spec.shape, skew.pending_bias));
      skew.pending_bias.clear();
      continue;
    }
    Rng rng(seed, full);
    WASTE_TRY(w.AddTensor(full, fmt, spec.shape, [&](int64_t, float* out) {
      FillRow(full, cols, in_dim, rng, out);
    }));
  }
  for (const std::string& name : preset.extra_outside_prefix) {
    Rng rng(seed, name);
    const int64_t h = c.hidden;
    WASTE_TRY(w.AddTensor(name, TensorFmt::kQ4G, {128, h}, [&](int64_t, float* out) {
      FillRow(name, h, h, rng, out);
    }));
  }
  return Status::Ok();
}

Status WriteExperts(ContainerWriter& w, uint64_t seed,
                    const std::function<void(const std::string&)>& log) {
  const ModelConfig& c = w.config();
  const format::RecordLayout& l = w.record_layout();
  const ExpertQuant& q = c.quant;
  const size_t per_book = static_cast<size_t>(q.entries) * q.vec_dim;
  for (int layer = 0; layer < c.n_layers; ++layer) {
    if (c.ffn_kind[layer] != FfnKind::kMoe) continue;
    // Residual stages refine: each stage's entries are half the previous.
    std::vector<float> books(3 * static_cast<size_t>(q.stages) * per_book);
    Rng book_rng(seed, fmt::format("codebooks.{}", layer));
    for (int kind = 0; kind < 3; ++kind) {
      for (int s = 0; s < q.stages; ++s) {
        float a = 0.3f * std::ldexp(1.0f, -s);
        book_rng.FillUniform(books.data() + (static_cast<size_t>(kind) * q.stages + s) * per_book,
                             per_book, a);
      }
    }
    Result<int> base = w.AddCodebooks(layer, books);
    if (!base) return base.error();
    WASTE_TRY(w.BeginBank(layer));
    const size_t index_bytes = static_cast<size_t>(l.scales_off - l.m[0].offset);
    for (int e = 0; e < c.moe.n_experts; ++e) {
      if (!w.dry_run()) {
        ExpertRecordBuilder& b = w.record();
        Rng rng(seed, static_cast<uint64_t>(layer), static_cast<uint64_t>(e));
        // Any byte is a valid index with 256 entries (or 6-bit packing).
        rng.Fill(b.indices(format::kGate), index_bytes);
        for (int kind = 0; kind < 3; ++kind) {
          // Row scale for weights of std ~1/sqrt(in): the codebook sum has
          // std ~0.2 (stages 0.3, 0.15, ... uniform).
          const float row_scale = 5.0f / std::sqrt(static_cast<float>(l.m[kind].cols));
          uint16_t* sc = b.scales(kind);
          for (int r = 0; r < l.m[kind].rows; ++r) {
            sc[r] = format::F32ToF16(row_scale * rng.Uniform(0.75f, 1.25f));
          }
        }
      }
      WASTE_TRY(w.AddRecord());
    }
    WASTE_TRY(w.EndBank());
    if (log) log(fmt::format("layer {}: {} experts", layer, c.moe.n_experts));
  }
  return Status::Ok();
}

}  // namespace

const char* DefaultTracePath() { return WASTE_DEFAULT_TRACE; }

Result<GenReport> Generate(const GenOptions& o) {
  WASTE_ASSIGN_OR_RETURN(Preset preset, MakePreset(o.preset));
  if (!o.override_json.empty()) {
    try {
      preset.config.merge_patch(OJson::parse(o.override_json));
    } catch (const std::exception& e) {
      return ArgError(fmt::format("--override: {}", e.what()));
    }
  }
  std::optional<VisionSpec> vision;
  if (!o.vision.empty()) {
    WASTE_ASSIGN_OR_RETURN(VisionSpec vs, ParseVisionSpec(o.vision));
    vision = vs;
    preset.extra_outside_prefix.clear();  // the real tower replaces the placeholder
  }
  std::optional<GeneratedTokenizer> tok;
  if (o.tokenizer) {
    tok = MakeTokenizer();
    int v = preset.config["vocab_size"].get<int>();
    // Toy shapes take exactly the tokenizer's vocabulary (as the reference
    // does); real shapes keep theirs, the specials fitting below it.
    preset.config["vocab_size"] = v < tok->vocab() || v <= 1024 ? tok->vocab() : v;
    preset.config["bos_token_id"] = tok->n_ranks;
    preset.config["eos_token_id"] = tok->n_ranks + 2;  // <|end_of_msg|>
  }
  WriterOptions wo;
  wo.arch = preset.arch;
  wo.tensor_prefix = preset.tensor_prefix;
  if (o.vq4p) wo.quant = ExpertQuant{4, 8, 64, 6, "VQ4P"};
  wo.dry_run = o.manifest_only;
  WASTE_ASSIGN_OR_RETURN(std::unique_ptr<ContainerWriter> w,
                         ContainerWriter::Create(o.out_dir, preset.config, wo));

  Skew skew;
  std::string trace_path = o.trace;
  if (trace_path.empty() && preset.skewed_routing) trace_path = DefaultTracePath();
  if (trace_path == "none") trace_path.clear();
  if (!trace_path.empty() && w->config().moe.n_experts > 0) {
    if (o.trace.empty() && !platform::PathExists(trace_path)) {
      skew.note = fmt::format("uniform (default trace {} not found)", trace_path);
    } else {
      WASTE_ASSIGN_OR_RETURN(RoutingTrace t, LoadRoutingTrace(trace_path));
      skew.trace = std::move(t);
    }
  }
  if (o.log) o.log(fmt::format("{}: trunk", o.preset));
  WASTE_TRY(WriteTrunk(*w, preset, o.seed, skew));
  if (vision) {
    // The media pad: the tokenizer's <|media_pad|>, else the last id.
    const int pad = tok ? tok->n_ranks + 8 : w->config().vocab - 1;
    WASTE_TRY(WriteVisionTower(*w, *vision, w->config().hidden, pad, o.seed));
  }
  if (w->config().moe.n_experts > 0) WASTE_TRY(WriteExperts(*w, o.seed, o.log));
  uint64_t aux = 0;
  if (tok) {
    WASTE_TRY(w->AddFile("tokenizer.model", tok->tokenizer_model));
    WASTE_TRY(w->AddFile("specials.json", tok->specials_json));
    WASTE_TRY(w->AddFile("chat.json", tok->chat_json));
    aux = tok->tokenizer_model.size() + tok->specials_json.size() + tok->chat_json.size();
  }
  WASTE_TRY(w->Finish());

  Result<std::string> text = platform::ReadWholeFile(o.out_dir + "/manifest.json");
  if (!text) return text.error();
  WASTE_ASSIGN_OR_RETURN(Manifest m, ParseManifest(*text));
  GenReport report;
  report.params = CountParameters(m);
  report.bytes = text->size() + aux;
  for (const TensorInfo& t : m.trunk) report.bytes += t.bytes;
  for (const BankInfo& b : m.banks) report.bytes += b.layer >= 0 ? b.bytes : 0;
  report.bytes += static_cast<uint64_t>(m.config.n_moe_layers()) * 3 * m.config.quant.stages *
                  format::CodebookRecordBytes(m.config.quant);
  if (skew.trace && skew.layers > 0) {
    report.routing = fmt::format(
        "router biases fitted to {} ({} tokens): top 10% of experts take {:.1f}% of picks "
        "(trace {:.1f}%)",
        trace_path, skew.trace->tokens, 100.0 * skew.share_fit / skew.layers,
        100.0 * skew.share_target / skew.layers);
  } else if (skew.trace) {
    report.routing = fmt::format("router biases from {} (not fitted in a dry run)", trace_path);
  } else {
    report.routing = skew.note.empty() ? "uniform router biases" : skew.note;
  }
  return report;
}

}  // namespace waste::gen
