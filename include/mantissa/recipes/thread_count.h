#pragma once
// The worker threads of a run, applied to OpenMP (and so to oneDNN).

namespace mantissa::recipes {

// Oversubscription beyond this many threads per core is refused (no run gains from it, and
// libgomp aborts the process when it cannot allocate a huge team).
inline constexpr int kMaxThreadsPerCore = 64;

// Sets OpenMP's thread count: 0 keeps the default (all cores), negative is an error, more than
// kMaxThreadsPerCore per core is an error, and more threads than this machine has cores runs
// (oversubscribed, much slower) with a warning, printed once per process.
void apply_thread_count(int threads);

}  // namespace mantissa::recipes
