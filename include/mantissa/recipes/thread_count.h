#pragma once
// The worker threads of a run, applied to OpenMP (and so to oneDNN).

namespace mantissa::recipes {

// Sets OpenMP's thread count: 0 keeps the default (all cores), negative is an error, and more
// threads than this machine has cores runs (oversubscribed, much slower) with a warning, printed
// once per process.
void apply_thread_count(int threads);

}  // namespace mantissa::recipes
