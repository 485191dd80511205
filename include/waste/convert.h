// Converting published checkpoints (safetensors in the Hugging Face layout)
// into waste containers, and verifying containers. Part of the separate
// waste_convert library (the engine itself never writes a container).
// Errors come back as values; the library never prints: progress goes to
// the callback.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "waste/status.h"

namespace waste {

struct ConvertProgress {
  std::string phase;             // "trunk", "codebooks", "experts", "layer", "finish", "done"
  int layer = -1;                // layer being worked on (-1: none)
  int layers_done = 0;           // expert layers finished (cached ones included)
  int layers_total = 0;          // expert layers this run converts
  int experts_done = 0;          // experts encoded so far in this run
  int experts_total = 0;         // experts this run has to encode
  double elapsed_s = 0;
  double eta_s = -1;             // -1 while unknown
  double source_gb_per_s = 0;    // source bytes read per second so far
  std::string message;           // one line, for "layer" and "done"
};

// A per-tensor storage rule for `waste convert --tensor-format`: every trunk
// matrix the recipe quantises (2-D, 65 536 elements or more, not the vision
// tower) whose container name contains `pattern` is stored as `format`:
// "f32", "q8g" or "q4g". Rules are tried in order; the first match wins.
struct TensorFormatRule {
  std::string pattern;
  std::string format;
};

struct ConvertOptions {
  std::string source_dir;
  std::string out_dir;
  std::vector<int> layers;       // expert layers to convert now; empty = all
  int threads = 0;               // 0 = every CPU this process may use
  std::string expert_format = "vq3r";  // vq3r | vq2r | vq4p
  uint64_t seed = 0;
  bool trunk8 = false;           // every quantised trunk matrix Q8G (default Q4G)
  // Before the defaults and --trunk8; a rule that matches no quantised
  // matrix of the checkpoint is refused (a typo would otherwise go unseen).
  std::vector<TensorFormatRule> tensor_formats;
  int64_t train_vectors = 262144;  // codebook training vectors per (layer, kind)
  int kmeans_iterations = 16;    // upper bound; stops earlier when converged
  // Rounds of codebook refinement after the greedy residual k-means (each
  // kept only when it lowers the greedy encoding's training error); 0 = none.
  int refine_rounds = 4;
  // Emulate the reference converter's recipe instead (max-scaled trunk
  // groups; books from 12 sampled experts, random-sample initialisation,
  // 10 Lloyd iterations, no empty-cluster repair; indices chosen against
  // f32 books; row scale max|w|): same container size, for side-by-side
  // quality measurements.
  bool reference_recipe = false;
  // Store the residual stream in a rotated basis (norm gains folded into
  // the matrices that read through them, a signed block Walsh-Hadamard
  // rotation; the same model in exact arithmetic, lower 4-bit and VQ error
  // at the same size). Off with --no-rotate and with the reference recipe;
  // skipped, with ConvertReport::rotation_skipped saying why, for a model
  // with a vision tower or a width without a power-of-two factor >= 32.
  bool rotate_residual = true;
  std::function<void(const ConvertProgress&)> progress;
};

struct ConvertLayerReport {
  int layer = -1;
  bool cached = false;           // found finished and valid from an earlier run
  double seconds = 0;
  double rel_error[3] = {0, 0, 0};  // gate, up, down: relative Frobenius error over the layer
  // Process CPU seconds (all threads) spent on the codebooks (sampling and
  // k-means) and on encoding the experts; 0 for a cached layer.
  double train_cpu_s = 0;
  double encode_cpu_s = 0;
  // Codebook refinement per kind: the greedy encoding's mean squared
  // training error (row-scale weighted) before the first round and after
  // each round tried, and how many rounds were kept. Empty when none ran.
  std::vector<double> refine_error[3];
  int refine_kept[3] = {0, 0, 0};
};

struct ConvertReport {
  bool complete = false;         // manifest written: the container opens
  int layers_total = 0;          // expert layers of the model
  int layers_finished = 0;       // of those, finished (this run or earlier)
  std::vector<ConvertLayerReport> layers;  // this run's layers, in order
  bool trunk_cached = false;
  double trunk_rel_error = 0;    // over every quantised trunk matrix
  double seconds = 0;
  uint64_t source_bytes_read = 0;
  uint64_t peak_rss_bytes = 0;
  int threads = 0;
  std::string family;            // the engine's family key: kimi-linear, kimi-k3, deepseek-v3, ...
  int rotation_block = 0;        // Walsh-Hadamard block of the residual rotation; 0 = not rotated
  std::string rotation_skipped;  // why a requested rotation does not apply ("" otherwise)
};

Result<ConvertReport> Convert(const ConvertOptions& options) noexcept;

struct VerifyOptions {
  std::string container_dir;
  std::string source_dir;        // empty: structure and checksums only
  int threads = 0;
  double outlier_factor = 1.5;   // a tensor is an outlier above factor x its group's median error
  std::function<void(const std::string&)> log;
};

struct VerifyTensorError {
  std::string name;              // trunk name, or "layer L expert E gate|up|down"
  double rel_error = 0;
  bool outlier = false;
};

struct VerifyReport {
  bool sound = false;            // every check passed
  std::vector<std::string> problems;
  uint64_t records_checked = 0;
  uint64_t trunk_tensors_checked = 0;
  std::vector<VerifyTensorError> errors;   // with a source: every tensor
  double expert_median_error = 0;
  double expert_max_error = 0;
  double trunk_max_error = 0;
  // With a source, the Walsh-Hadamard block of the residual rotation the
  // container records and the comparison used (0 = not rotated).
  int rotation_block = 0;
};

Result<VerifyReport> Verify(const VerifyOptions& options) noexcept;

}  // namespace waste
