// Clang's thread-safety annotations (-Wthread-safety), spelled so that GCC
// and MSVC see nothing. They state which mutex guards which member and
// which functions must (or must not) hold it; clang then checks every
// access at compile time. libstdc++'s std::mutex carries no annotations, so
// annotated code uses the small Mutex / MutexLock wrappers below (a
// std::mutex and a std::unique_lock underneath: condition variables wait on
// MutexLock::native()).
//
// Checked by the ctest `thread_safety_analysis` (clang++ -fsyntax-only
// -Wthread-safety over the annotated files, tests/CMakeLists.txt), or for
// the whole tree with a clang build:
//   cmake -S . -B build-clang -G Ninja -DCMAKE_CXX_COMPILER=clang++
//         -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety"
#pragma once

#include <mutex>

#if defined(__clang__)
#define WASTE_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define WASTE_THREAD_ANNOTATION_(x)
#endif

#define WASTE_CAPABILITY(name) WASTE_THREAD_ANNOTATION_(capability(name))
#define WASTE_SCOPED_CAPABILITY WASTE_THREAD_ANNOTATION_(scoped_lockable)
#define WASTE_GUARDED_BY(x) WASTE_THREAD_ANNOTATION_(guarded_by(x))
#define WASTE_PT_GUARDED_BY(x) WASTE_THREAD_ANNOTATION_(pt_guarded_by(x))
#define WASTE_REQUIRES(...) WASTE_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define WASTE_EXCLUDES(...) WASTE_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define WASTE_ACQUIRE(...) WASTE_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define WASTE_RELEASE(...) WASTE_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define WASTE_RETURN_CAPABILITY(x) WASTE_THREAD_ANNOTATION_(lock_returned(x))
// For the rare access the analysis cannot follow (a slot a reader thread
// owns while it loads); say why next to each use.
#define WASTE_NO_THREAD_SAFETY_ANALYSIS WASTE_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace waste {

class WASTE_CAPABILITY("mutex") Mutex {
 public:
  void Lock() WASTE_ACQUIRE() { mu_.lock(); }
  void Unlock() WASTE_RELEASE() { mu_.unlock(); }
  std::mutex& native() WASTE_RETURN_CAPABILITY(this) { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope; native() is the std::unique_lock a
// condition variable waits on (the wait releases and retakes it, which the
// analysis does not see and need not: the lock is held again on return).
class WASTE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) WASTE_ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() WASTE_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace waste
