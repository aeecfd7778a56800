#pragma once
// The collective operations data-parallel training needs (docs/distributed.md), behind one
// interface: MPI is the first implementation (mpi_communicator.cpp), a single-process one
// stands in for a world of size 1, and a CUDA backend can put NCCL in MPI's place without
// touching the callers. Every rank must call the same collectives in the same order.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/core/dtype.h"
#include "mantissa/core/tensor.h"

namespace mantissa::dist {

enum class ReduceOp { kSum, kMax, kMin };

// The exit status of a job that a collective timeout ended (set_collective_timeout).
inline constexpr int kCollectiveTimeoutExitStatus = 5;

// A collective started with all_reduce_async. wait() blocks until it is done; test() asks
// without blocking and lets the backend make progress (MPI advances non-blocking collectives
// only inside MPI calls, so the caller polls while it computes).
class Work {
 public:
  virtual ~Work() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  bool is_global_zero() const { return rank() == 0; }
  // "mpi", "single" (later "nccl").
  virtual std::string backend() const = 0;

  // In place over `count` elements at `data`. Payload dtypes: float32, bfloat16 (summed in
  // float32 and rounded once per combining step), float64, int64.
  virtual void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  // Starts the same reduction and returns at once; the buffer must stay alive and untouched
  // until the Work is done.
  virtual std::unique_ptr<Work> all_reduce_async(void* data, int64_t count, DType dtype,
                                                 ReduceOp op) = 0;
  // Copies `bytes` bytes at `data` from rank `root` to every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // All-gather of byte runs of different lengths: rank r contributes counts[r] bytes (this
  // rank's at `mine`), and every rank receives all of them end to end, in rank order, in `out`
  // (sum of counts bytes). `counts` must be the same on every rank.
  virtual void all_gather_bytes(const void* mine, void* out,
                                const std::vector<int64_t>& counts) = 0;
  // Starts the same all-gather and returns at once (MPI_Iallgatherv); `mine` and `out` must
  // stay alive, and `out` untouched, until the Work is done. Counts the same bytes in the same
  // places as all_gather_bytes. The default runs the blocking one and returns a done Work.
  virtual std::unique_ptr<Work> all_gather_bytes_async(const void* mine, void* out,
                                                       const std::vector<int64_t>& counts);
  // Reduce-scatter: `in` holds sum(counts) elements of `dtype` (float32, float64, or bfloat16
  // summed as all_reduce sums it) on every rank; rank r receives in `out` the sums over the
  // ranks of elements [counts[0] + ... + counts[r - 1], ... + counts[r]). `counts` must be the
  // same on every rank.
  virtual void reduce_scatter(const void* in, void* out, const std::vector<int64_t>& counts,
                              DType dtype) = 0;
  // Starts the same reduce-scatter and returns at once (MPI_Ireduce_scatter); `in` and `out`
  // must stay alive, and `out` untouched, until the Work is done. The default runs the blocking
  // one and returns a done Work.
  virtual std::unique_ptr<Work> reduce_scatter_async(const void* in, void* out,
                                                     const std::vector<int64_t>& counts,
                                                     DType dtype);
  virtual void barrier() = 0;
  // Seconds this rank waits inside one collective (a blocking one, or the wait for a started
  // one) for the other ranks; beyond it the rank prints `mantissa: collective NAME timed out
  // after N s waiting for rank(s) ...` (the ranks that have not reached it, when the ranks share
  // a machine) and ends the job with kCollectiveTimeoutExitStatus. 0: forever (the default).
  // The communicator keeps it until it is set again.
  virtual void set_collective_timeout(double /*seconds*/) {}
  virtual double collective_timeout() const { return 0; }
  // Ends every process of the job with `code`, after this rank printed why. Never returns.
  [[noreturn]] virtual void abort(int code) = 0;

  // Conveniences over the above: a contiguous tensor reduced or broadcast in place.
  void all_reduce(Tensor& t, ReduceOp op);
  void broadcast(Tensor& t, int root);
  double all_reduce(double value, ReduceOp op);
  // A string from `root` (its length first, then its bytes).
  std::string broadcast(const std::string& text, int root);
};

// World size 1: every collective leaves the data as it is.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "single"; }
  void all_reduce(void*, int64_t, DType, ReduceOp) override {}
  std::unique_ptr<Work> all_reduce_async(void*, int64_t, DType, ReduceOp) override;
  void broadcast(void*, int64_t, int) override {}
  void all_gather_bytes(const void* mine, void* out, const std::vector<int64_t>& counts) override;
  void reduce_scatter(const void* in, void* out, const std::vector<int64_t>& counts,
                      DType dtype) override;
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
  using Communicator::all_reduce;
  using Communicator::broadcast;
};

// Whether this build has the MPI backend (CMake found MPI: libopenmpi-dev).
bool mpi_compiled();
// Whether this process was started by an MPI launcher (mpirun / mpiexec set
// OMPI_COMM_WORLD_SIZE or PMI_SIZE), and the world size the launcher announced (1 otherwise).
bool launched_by_mpi();
int launcher_world_size();

// The process's communicator, created on first use: MPI (MPI_Init_thread, finalised at exit)
// when launched by mpirun with more than one process, the single-process one otherwise.
// Throws when the launcher started several processes but this build has no MPI.
std::shared_ptr<Communicator> world();

// Prints "mantissa: rank R of N failed: <what>; aborting the job" to stderr and ends every
// rank (MPI_Abort) when the world has more than one process; returns when it has one, so the
// caller reports the error the usual way.
void abort_job_if_distributed(const std::string& what, int code);

// The message for builds without MPI (what to install, how to rebuild).
std::string mpi_missing_message(const std::string& what);

}  // namespace mantissa::dist
