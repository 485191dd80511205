#!/bin/sh
# ThreadSanitizer pass over the concurrent code: the thread pool, the
# expert streaming tests (cache, readers, hotlist warm-up, lookahead), and
# sessions running at once (the model's fair run lock, two threads
# generating, the server's --parallel workers, stop and queue, the
# follow-on prefill and the requests that wait for it, the prompt cache's
# stored points).
# Builds the `tsan` preset (build/tsan) and runs `ctest --preset tsan`
# (which passes tests/tsan.supp: reports from inside the uninstrumented
# libcpp-httplib.so are suppressed).
# Not part of scripts/test.sh: building waste_core with -fsanitize=thread
# takes longer than the CI budget allows on 2 cores (docs/HARDENING.md).
# Exit 0 = clean; any TSan report fails the test that produced it.
set -eu
cd "$(dirname "$0")/.."
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
cmake --preset tsan >/dev/null
# Only what the tsan test preset runs (and `waste` for the CLI streaming test).
cmake --build build/tsan -j "$jobs" --target thread_pool_test streaming_identity_test \
  streaming_memory_test streaming_hotlist_test streaming_errors_test streaming_budget_test \
  expert_cache_test expert_reader_test fair_mutex_test session_test serve_http_test serve_vision_test serve_follow_on_test serve_point_store_test waste-gen waste
# setarch -R: TSan needs a fixed memory layout on kernels with high ASLR entropy.
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
  exec setarch "$(uname -m)" -R ctest --preset tsan -j "$jobs" "$@"
fi
exec ctest --preset tsan -j "$jobs" "$@"
