#include "format/rope_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace waste {

// The reference sizes its rotary table for 64 pairs (d_r <= 128).
constexpr int kMaxRopePairs = 64;

void PlainRopeFrequencies(double base, int qk_rope, std::vector<float>& omega) {
  int pairs = qk_rope / 2;
  omega.resize(static_cast<size_t>(pairs));
  for (int j = 0; j < pairs; ++j) {
    omega[j] = static_cast<float>(std::pow(base, -2.0 * j / qk_rope));
  }
}

Status ResolveRope(const json::Json& config, std::string_view origin, ModelConfig& cfg) {
  RopeConfig& r = cfg.rope;
  r = RopeConfig{};
  const int dr = cfg.mla.qk_rope;
  if (cfg.mla.nope || dr / 2 <= 0) return Status::Ok();  // no rotary at all

  if (dr / 2 > kMaxRopePairs) {
    return FormatError(fmt::format(
        "{}: config.qk_rope_head_dim {} needs rotation of {} pairs, more than the {} this engine "
        "implements (a NoPE model sets mla_use_nope: true)",
        origin, dr, dr / 2, kMaxRopePairs));
  }
  r.enabled = true;
  r.theta = json::Number(json::Member(&config, "rope_theta")).value_or(10000.0);
  // Below 1 the frequencies grow with the pair index (1e-300 overflows them
  // to Inf); real bases are 1e4..1e7. waste refuses outside [1, 1e12]
  // where the reference only asks for > 0 (docs/HARDENING.md).
  if (!std::isfinite(r.theta) || r.theta < 1.0 || r.theta > 1e12) {
    return FormatError(fmt::format("{}: config.rope_theta {} cannot define rotary frequencies "
                                   "(expected a base in [1, 1e12])",
                                   origin, r.theta));
  }
  PlainRopeFrequencies(r.theta, dr, r.omega);

  const json::Json* rs = json::Member(&config, "rope_scaling");
  // Absent, null, {} and (per the dialect) any non-object: plain RoPE.
  if (rs == nullptr || !rs->is_object() || rs->empty()) return Status::Ok();

  std::optional<std::string> type = json::String(json::Member(rs, "type"));
  if (!type) type = json::String(json::Member(rs, "rope_type"));
  if (!type) {
    return FormatError(fmt::format("{}: config.rope_scaling carries no type (expected "
                                   "\"type\": \"yarn\")",
                                   origin));
  }
  if (*type != "yarn") {
    return FormatError(fmt::format("{}: config.rope_scaling type \"{}\" is not implemented, only "
                                   "yarn",
                                   origin, *type));
  }
  r.factor = json::Number(json::Member(rs, "factor")).value_or(1.0);
  if (!std::isfinite(r.factor)) {
    return FormatError(fmt::format("{}: config.rope_scaling.factor is not finite", origin));
  }
  if (r.factor <= 1.0) return Status::Ok();  // plain frequencies, att_mul 1

  r.mscale = json::Number(json::Member(rs, "mscale")).value_or(1.0);
  r.mscale_all_dim = json::Number(json::Member(rs, "mscale_all_dim")).value_or(0.0);
  if (r.mscale != r.mscale_all_dim) {
    return FormatError(fmt::format(
        "{}: config.rope_scaling mscale {} != mscale_all_dim {}: scaling cos/sin by their ratio "
        "is not implemented",
        origin, r.mscale, r.mscale_all_dim));
  }
  std::optional<int64_t> orig =
      json::Integer(json::Member(rs, "original_max_position_embeddings"));
  int64_t orig_v = orig.value_or(4096);
  r.beta_fast = json::Number(json::Member(rs, "beta_fast")).value_or(32.0);
  r.beta_slow = json::Number(json::Member(rs, "beta_slow")).value_or(1.0);
  if (orig_v < 1 || orig_v > (int64_t{1} << 30) || !std::isfinite(r.beta_fast) ||
      !std::isfinite(r.beta_slow) || r.beta_fast <= 0.0 || r.beta_slow <= 0.0 ||
      !std::isfinite(r.mscale_all_dim) || r.theta == 1.0) {
    return FormatError(fmt::format(
        "{}: config.rope_scaling out of range: original_max_position_embeddings {}, beta_fast "
        "{}, beta_slow {}, mscale_all_dim {}, rope_theta {} (expected positions >= 1, betas > 0 "
        "and a base != 1)",
        origin, orig_v, r.beta_fast, r.beta_slow, r.mscale_all_dim, r.theta));
  }
  r.original_max_position = static_cast<int>(orig_v);
  r.yarn = true;

  // MODEL.md §4.3 steps 4-6, in float64 with f32 results.
  const double two_pi = 2.0 * std::numbers::pi;
  const double log_base = std::log(r.theta);
  auto corr = [&](double n) {
    return dr * std::log(static_cast<double>(orig_v) / (n * two_pi)) / (2.0 * log_base);
  };
  double low = std::max(std::floor(corr(r.beta_fast)), 0.0);
  double high = std::min(std::ceil(corr(r.beta_slow)), static_cast<double>(dr - 1));
  if (low == high) high += 0.001;
  for (size_t j = 0; j < r.omega.size(); ++j) {
    double w0 = r.omega[j];  // the f32-rounded plain frequency
    double ramp = std::clamp((static_cast<double>(j) - low) / (high - low), 0.0, 1.0);
    r.omega[j] = static_cast<float>((w0 / r.factor) * ramp + w0 * (1.0 - ramp));
  }
  if (r.mscale_all_dim != 0.0) {
    double m = 0.1 * r.mscale_all_dim * std::log(r.factor) + 1.0;
    r.att_mul = static_cast<float>(m * m);
  }
  return Status::Ok();
}

}  // namespace waste
