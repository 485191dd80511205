// Environment variables read once at open into a per-engine options struct.
// An explicit Config value always beats the environment. This file is the
// only place the library calls getenv (docs/ENV.md lists every variable),
// but for the per-process kernel table (WASTE_BACKEND, read once in
// src/kernels/dispatch.cc, a layer that builds without this one).
// Per-process choices elsewhere (the converter's search kernel) read
// through EnvString once.
#pragma once

#include <string>

#include "waste/config.h"

namespace waste {

struct EngineOptions {
  bool verify = false;
  bool direct_io = true;
  int lookahead = 6;
  int io_threads = 2;
  bool force_baseline = false;
  bool profile = false;
  std::string cpu_list;
  int threads = 0;                   // Config::threads, else WASTE_THREADS; 0 = auto
  int spin_us = -1;                  // WASTE_SPIN (clamped 0..100000); -1 = the pool's default
  int io_depth = 8;                  // WASTE_IO_DEPTH, 1..64
  std::string io_backend;            // WASTE_IO: "uring", "threads", "sync" or "" (auto)
  bool io_fixed_buffers = false;     // WASTE_IO_FIXED
  std::string cache_policy;          // WASTE_CACHE_POLICY when Config leaves the default
  std::string cache_trace;           // WASTE_CACHE_TRACE: file for every cache event
  bool warm_wait = false;            // WASTE_WARM_WAIT: open waits for the hotlist warm-up
  // The trunk and the expert cache arena advised for transparent huge pages
  // (Linux). WASTE_HUGE_PAGES=0 turns it off, to measure the difference.
  bool huge_pages = true;
};

// "On" = set (even empty) and first character not '0'.
bool EnvFlag(const char* name);
// Integer value, `fallback` when unset or not a number.
int EnvInt(const char* name, int fallback);
// The value, or "" when unset.
std::string EnvString(const char* name);
// WASTE_THREADS parsed like atoi (garbage reads as 0 = unset).
int ThreadsFromEnv();
EngineOptions ResolveOptions(const Config& config);

}  // namespace waste
