// How fast this machine hands out fresh memory: maps N GiB (2 MiB aligned,
// MADV_HUGEPAGE when HUGE is 1), writes one byte per 4 KiB page (the first
// touch, which the kernel and, in a VM, the host must back), then memsets
// the same memory again (the second pass, DRAM speed). Used for
// docs/PERFORMANCE.md "The full-size table": a big expert cache pays the
// first touch once per slot it fills.
//   cc -O2 -o first_touch bench/first_touch.c && ./first_touch 12 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: first_touch GIB HUGE(0|1)\n");
    return 2;
  }
  const size_t align = (size_t)2 << 20;
  const size_t n = (size_t)atol(argv[1]) << 30;
  const int huge = atoi(argv[2]);
  char* base = mmap(NULL, n + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  char* p = (char*)(((size_t)base + align - 1) & ~(align - 1));
  if (huge) madvise(p, n, MADV_HUGEPAGE);
  double t = Now();
  for (size_t i = 0; i < n; i += 4096) p[i] = 1;
  double d = Now() - t;
  printf("%zu GiB huge=%d: first touch %.2f s = %.2f GB/s\n", n >> 30, huge, d, (double)n / d / 1e9);
  t = Now();
  memset(p, 2, n);
  d = Now() - t;
  printf("second pass (memset) %.2f GB/s\n", (double)n / d / 1e9);
  return 0;
}
