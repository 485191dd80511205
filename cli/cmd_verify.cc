// `waste verify CONTAINER [--source CKPT]`: a thin front end over
// waste/convert.h. Exit status 0 when the container is sound, 1 when not
// (or it cannot be read, or is no container: as for `waste run`), 2 on a
// usage error (a malformed option value).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "waste/convert.h"

namespace waste::cli {
namespace {

std::string Count(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

int VerifyMain(const std::vector<std::string>& args) {
  CLI::App app("Check a container: every record's header and crc32, every trunk tensor; with --source, "
               "the reconstruction error of every tensor against the checkpoint",
               "waste verify");
  VerifyOptions o;
  bool json = false, all = false;
  app.add_option("CONTAINER", o.container_dir, "container directory")->required();
  app.add_option("--source", o.source_dir, "checkpoint the container was converted from");
  app.add_option("--threads", o.threads, "worker threads (default: every CPU)");
  app.add_flag("--all", all, "print every tensor's error, not only outliers");
  app.add_flag("--json", json, "the report as one JSON object on stdout");
  std::vector<std::string> rev(args.rbegin(), args.rend());
  try {
    app.parse(rev);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.threads < 0) {
    std::fprintf(stderr,
                 "waste verify: --threads: %d is not a thread count (a positive number; 0 or none: "
                 "every CPU)\n",
                 o.threads);
    return 2;
  }
  if (!json) o.log = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  Result<VerifyReport> r = Verify(o);
  if (!r) {
    std::fprintf(stderr, "waste verify: %s\n", r.error().message().c_str());
    return 1;
  }
  const VerifyReport& rep = *r;
  if (json) {
    nlohmann::ordered_json errs = nlohmann::ordered_json::array();
    for (const VerifyTensorError& e : rep.errors) {
      if (all || e.outlier) errs.push_back({{"name", e.name}, {"rel_error", e.rel_error}, {"outlier", e.outlier}});
    }
    nlohmann::ordered_json j = {{"sound", rep.sound}, {"problems", rep.problems},
                                {"records_checked", rep.records_checked},
                                {"trunk_tensors_checked", rep.trunk_tensors_checked},
                                {"expert_median_error", rep.expert_median_error},
                                {"expert_max_error", rep.expert_max_error},
                                {"trunk_max_error", rep.trunk_max_error},
                                {"rotation_block", rep.rotation_block}, {"errors", errs}};
    std::fprintf(stdout, "%s\n", j.dump().c_str());  // one object per line, as every command prints
  } else {
    for (const VerifyTensorError& e : rep.errors) {
      if (all || e.outlier) {
        std::fprintf(stdout, "%-60s %8.4f%s\n", e.name.c_str(), e.rel_error, e.outlier ? "  OUTLIER" : "");
      }
    }
    for (const std::string& p : rep.problems) std::fprintf(stdout, "problem: %s\n", p.c_str());
    const std::string verdict =
        rep.sound ? "sound"
                  : "NOT sound (" + Count(rep.problems.size(), "problem", "problems") + ")";
    std::fprintf(stdout, "%s: %s — %s, %s", o.container_dir.c_str(), verdict.c_str(),
                 Count(rep.records_checked, "record", "records").c_str(),
                 Count(rep.trunk_tensors_checked, "trunk tensor", "trunk tensors").c_str());
    if (!o.source_dir.empty()) {
      std::fprintf(stdout, "; expert error median %.2f%% max %.2f%%, trunk max %.2f%%",
                   100 * rep.expert_median_error, 100 * rep.expert_max_error, 100 * rep.trunk_max_error);
    }
    std::fprintf(stdout, "\n");
  }
  return rep.sound ? 0 : 1;
}

}  // namespace waste::cli
