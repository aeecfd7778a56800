#pragma once
#include <string>

namespace mantissa {

// How long an idle OpenMP thread spins before it sleeps (docs/performance.md, "OpenMP threads on
// a busy machine"). The `mantissa` command calls bound_openmp_spinning first thing; a program
// that links the library can do the same.
//
// libgomp's default spins for about 300,000 pauses (several milliseconds on recent cores) at the
// end of every parallel region. When other processes share the cores, a spinning thread takes
// the time slice its teammate needs, and every region then waits for a descheduled thread: two
// threads ran the MLP 2.5-4x slower than one. 30,000 pauses (about 2 ms) still cover most gaps
// between one operation's region and the next, so an idle machine keeps its speed (3,000 cost an
// idle MLP step 4-10 %), while a busy one loses little more than with 3,000.
inline constexpr const char* kOpenMpSpinCount = "30000";

// The spin count for a process that starts while `others_running` other tasks are runnable:
// kOpenMpSpinCount when the cores are free, "0" (sleep at once, as OMP_WAIT_POLICY=passive) when
// another task is running, since mantissa starts a thread per core by default and one of them
// then shares its core. On a busy 2-core machine two threads of a small model ran 5-40x
// slower with 30,000 pauses than with none; on an idle one no spinning cost about 20 %.
const char* openmp_spin_count_for(int others_running);

// Tasks runnable on this machine now, this process excluded: the least of three readings of
// /proc/loadavg's running count a millisecond apart (a task that only passes through is not
// load); -1 when it cannot be read.
int other_running_tasks();

// Gives the process openmp_spin_count_for(other_running_tasks()) as GOMP_SPINCOUNT (the
// machine's load at the start decides; libgomp cannot change it later) unless the user chose a
// wait policy
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT set). libgomp reads its environment once, in its
// constructor before main, and glibc installs the environment only after an executable's
// .preinit_array has run, so the only way in is to set the variable and execute the program
// again (/proc/self/exe, same process id, same arguments). Call first thing in main: nothing
// done before it survives. It returns (leaving OpenMP's default) when the exec fails, under
// valgrind, which would not follow the new image, and when the program was started through the
// dynamic loader by name (`ld-linux-x86-64.so.2 mantissa ...`), whose /proc/self/exe is the
// loader. argv must be main's, ending in a null pointer.
void bound_openmp_spinning(char** argv);

// One line for `mantissa info`: the wait policy in effect and where it came from.
std::string describe_openmp_wait();

}  // namespace mantissa
