#include "generation.h"

namespace waste::cli {

GenParams ParamsFromOptions(const Options& o) {
  GenParams p;
  p.max_tokens = static_cast<int>(o.n_tokens > 0x7fffffffu ? 0x7fffffffu : o.n_tokens);
  p.temperature = o.temp;
  p.top_p = o.top_p;
  p.top_k = o.top_k;
  p.seed = o.seed;
  return p;
}

}  // namespace waste::cli
