// The Communicator conveniences, the single-process communicator, and the choice of the
// process's communicator (world()).
#include "mantissa/dist/communicator.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "dist/mpi_backend.h"
#include "mantissa/core/error.h"

namespace mantissa::dist {
namespace {

class DoneWork final : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  return std::atoi(v);
}

}  // namespace

void Communicator::all_reduce(Tensor& t, ReduceOp op) {
  MANTISSA_CHECK(t.is_contiguous(), "dist.all_reduce", "the tensor must be contiguous");
  all_reduce(t.data_ptr(), t.numel(), t.dtype(), op);
}

void Communicator::broadcast(Tensor& t, int root) {
  MANTISSA_CHECK(t.is_contiguous(), "dist.broadcast", "the tensor must be contiguous");
  broadcast(t.data_ptr(), static_cast<int64_t>(t.nbytes()), root);
}

double Communicator::all_reduce(double value, ReduceOp op) {
  all_reduce(&value, 1, kFloat64, op);
  return value;
}

std::string Communicator::broadcast(const std::string& text, int root) {
  int64_t n = static_cast<int64_t>(text.size());
  broadcast(&n, sizeof(n), root);
  std::string out = rank() == root ? text : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) broadcast(out.data(), n, root);
  return out;
}

std::unique_ptr<Work> Communicator::all_gather_bytes_async(const void* mine, void* out,
                                                           const std::vector<int64_t>& counts) {
  all_gather_bytes(mine, out, counts);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<Work> Communicator::reduce_scatter_async(const void* in, void* out,
                                                         const std::vector<int64_t>& counts,
                                                         DType dtype) {
  reduce_scatter(in, out, counts, dtype);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<Work> SingleProcessCommunicator::all_reduce_async(void*, int64_t, DType, ReduceOp) {
  return std::make_unique<DoneWork>();
}

void SingleProcessCommunicator::all_gather_bytes(const void* mine, void* out,
                                                 const std::vector<int64_t>& counts) {
  MANTISSA_CHECK(counts.size() == 1, "dist.single", "{} counts for a job of 1 rank", counts.size());
  if (counts[0] > 0) std::memcpy(out, mine, static_cast<size_t>(counts[0]));
}

void SingleProcessCommunicator::reduce_scatter(const void* in, void* out,
                                               const std::vector<int64_t>& counts, DType dtype) {
  MANTISSA_CHECK(counts.size() == 1, "dist.single", "{} counts for a job of 1 rank", counts.size());
  MANTISSA_CHECK(dtype == kFloat32 || dtype == kFloat64 || dtype == kBFloat16, "dist.single",
                 "reduce_scatter sums float32, bfloat16 or float64, got {}", dtype.name());
  if (counts[0] > 0) std::memcpy(out, in, static_cast<size_t>(counts[0] * dtype.itemsize()));
}

void SingleProcessCommunicator::abort(int code) { std::exit(code); }

bool mpi_compiled() {
#ifdef MANTISSA_HAS_MPI
  return true;
#else
  return false;
#endif
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    if (int n = env_int(name); n > 0) return n;
  }
  return 1;
}

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

std::string mpi_missing_message(const std::string& what) {
  return fmt::format(
      "{} needs MPI, and this mantissa was built without it: install Open MPI "
      "(`apt-get install libopenmpi-dev openmpi-bin`, or scripts/setup.sh) and configure and "
      "build again (CMake then finds MPI)",
      what);
}

std::shared_ptr<Communicator> world() {
  static std::mutex mutex;
  static std::shared_ptr<Communicator> comm;
  std::lock_guard<std::mutex> lock(mutex);
  if (comm) return comm;
  if (launched_by_mpi() && launcher_world_size() > 1) {
    MANTISSA_CHECK(mpi_compiled(), "dist", "{}",
                   mpi_missing_message("this process was started by mpirun with " +
                                       std::to_string(launcher_world_size()) +
                                       " processes; data-parallel training"));
    comm = make_mpi_communicator();
  } else {
    comm = std::make_shared<SingleProcessCommunicator>();
  }
  return comm;
}

void abort_job_if_distributed(const std::string& what, int code) {
  if (!launched_by_mpi() || launcher_world_size() <= 1 || !mpi_compiled()) return;
  std::shared_ptr<Communicator> c = world();
  if (c->world_size() <= 1) return;
  fmt::print(stderr, "mantissa: rank {} of {} failed: {}; aborting the job\n", c->rank(),
             c->world_size(), what);
  std::fflush(stderr);
  c->abort(code);
}

}  // namespace mantissa::dist
