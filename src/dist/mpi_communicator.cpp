// The MPI implementation of Communicator (Open MPI from Debian: libopenmpi-dev). MPI has no
// bfloat16 type: bf16 payloads travel as 16-bit words and are combined by user-defined
// operations that widen to float32, combine and round back once (round to nearest even).
// With a collective timeout, a watchdog (collective_watchdog.h) ends the job when this rank
// waits in one collective too long, naming the ranks that have not reached it: every rank counts
// the collectives it enters on an arrival board, one slot per rank in memory shared by the
// ranks of one machine (MPI_Win_allocate_shared), which the watchdog reads without MPI.
#include "dist/mpi_backend.h"

#ifdef MANTISSA_HAS_MPI
#include <mpi.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

#include "dist/collective_watchdog.h"
#include "mantissa/core/convert.h"
#endif

namespace mantissa::dist {

#ifdef MANTISSA_HAS_MPI
namespace {

constexpr int kChunk = 4096;

template <typename Combine>
void combine_bf16(void* in, void* inout, int* len, Combine combine) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  float x[kChunk], y[kChunk];
  for (int i = 0; i < *len; i += kChunk) {
    const int m = std::min(kChunk, *len - i);
    convert_bf16_to_f32(a + i, x, m);
    convert_bf16_to_f32(b + i, y, m);
    for (int k = 0; k < m; ++k) y[k] = combine(x[k], y[k]);
    convert_f32_to_bf16(y, b + i, m);
  }
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  combine_bf16(in, inout, len, [](float a, float b) { return a + b; });
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  // NaN wins, as a found-inf flag must.
  combine_bf16(in, inout, len, [](float a, float b) { return (a > b || a != a) ? a : b; });
}
void bf16_min(void* in, void* inout, int* len, MPI_Datatype*) {
  combine_bf16(in, inout, len, [](float a, float b) { return (a < b || a != a) ? a : b; });
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  fail("dist.mpi", "{} failed: {}", call, std::string(text, static_cast<size_t>(n)));
}

class MpiWork final : public Work {
 public:
  // `what` names the collective in a timeout's message; `sizes` and `offsets` are the count and
  // displacement arrays of a v-collective, which MPI reads until the request completes.
  MpiWork(MPI_Request r, CollectiveWatchdog& watchdog, int64_t seq,
          const char* what = "all_reduce (gradient bucket)", std::vector<int> sizes = {},
          std::vector<int> offsets = {})
      : request_(r),
        watchdog_(watchdog),
        seq_(seq),
        what_(what),
        sizes_(std::move(sizes)),
        offsets_(std::move(offsets)) {}
  ~MpiWork() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }
  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    CollectiveWatchdog::Scope waiting(watchdog_, what_, seq_);
    check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
  }

 private:
  MPI_Request request_;
  CollectiveWatchdog& watchdog_;
  int64_t seq_;
  const char* what_;
  std::vector<int> sizes_, offsets_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Only the thread that trains calls MPI; OpenMP workers never do.
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Op_create(&bf16_sum, 1, &bf16_ops_[0]);
    MPI_Op_create(&bf16_max, 1, &bf16_ops_[1]);
    MPI_Op_create(&bf16_min, 1, &bf16_ops_[2]);
    make_arrival_board();
  }

  void set_collective_timeout(double seconds) override { watchdog_.set_timeout(seconds); }
  double collective_timeout() const override { return watchdog_.timeout(); }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    if (count == 0) return;
    CollectiveWatchdog::Scope waiting(watchdog_, "all_reduce", enter());
    check(
        MPI_Allreduce(MPI_IN_PLACE, data, to_int(count), mpi_type(dtype), mpi_op(dtype, op), comm_),
        "MPI_Allreduce");
  }

  std::unique_ptr<Work> all_reduce_async(void* data, int64_t count, DType dtype,
                                         ReduceOp op) override {
    MPI_Request r = MPI_REQUEST_NULL;
    const int64_t seq = count > 0 ? enter() : entered_;
    if (count > 0) {
      check(MPI_Iallreduce(MPI_IN_PLACE, data, to_int(count), mpi_type(dtype), mpi_op(dtype, op),
                           comm_, &r),
            "MPI_Iallreduce");
    }
    return std::make_unique<MpiWork>(r, watchdog_, seq);
  }

  void broadcast(void* data, int64_t bytes, int root) override {
    if (bytes == 0) return;
    CollectiveWatchdog::Scope waiting(watchdog_, "broadcast", enter());
    check(MPI_Bcast(data, to_int(bytes), MPI_BYTE, root, comm_), "MPI_Bcast");
  }

  void all_gather_bytes(const void* mine, void* out, const std::vector<int64_t>& counts) override {
    const auto [sizes, offsets] = counts_and_offsets(counts);
    CollectiveWatchdog::Scope waiting(watchdog_, "all_gather", enter());
    check(MPI_Allgatherv(mine, sizes[static_cast<size_t>(rank_)], MPI_BYTE, out, sizes.data(),
                         offsets.data(), MPI_BYTE, comm_),
          "MPI_Allgatherv");
  }

  std::unique_ptr<Work> all_gather_bytes_async(const void* mine, void* out,
                                               const std::vector<int64_t>& counts) override {
    auto [sizes, offsets] = counts_and_offsets(counts);
    MPI_Request r = MPI_REQUEST_NULL;
    const int64_t seq = enter();
    check(MPI_Iallgatherv(mine, sizes[static_cast<size_t>(rank_)], MPI_BYTE, out, sizes.data(),
                          offsets.data(), MPI_BYTE, comm_, &r),
          "MPI_Iallgatherv");
    // The vectors' heap arrays move into the Work unchanged: MPI keeps reading them.
    return std::make_unique<MpiWork>(r, watchdog_, seq, "all_gather (fsdp prefetch)",
                                     std::move(sizes), std::move(offsets));
  }

  void reduce_scatter(const void* in, void* out, const std::vector<int64_t>& counts,
                      DType dtype) override {
    MANTISSA_CHECK(dtype == kFloat32 || dtype == kFloat64 || dtype == kBFloat16, "dist.mpi",
                   "reduce_scatter sums float32, bfloat16 or float64, got {}", dtype.name());
    const auto [sizes, offsets] = counts_and_offsets(counts);
    CollectiveWatchdog::Scope waiting(watchdog_, "reduce_scatter", enter());
    check(MPI_Reduce_scatter(in, out, sizes.data(), mpi_type(dtype), mpi_op(dtype, ReduceOp::kSum),
                             comm_),
          "MPI_Reduce_scatter");
  }

  std::unique_ptr<Work> reduce_scatter_async(const void* in, void* out,
                                             const std::vector<int64_t>& counts,
                                             DType dtype) override {
    MANTISSA_CHECK(dtype == kFloat32 || dtype == kFloat64 || dtype == kBFloat16, "dist.mpi",
                   "reduce_scatter sums float32, bfloat16 or float64, got {}", dtype.name());
    auto [sizes, offsets] = counts_and_offsets(counts);
    MPI_Request r = MPI_REQUEST_NULL;
    const int64_t seq = enter();
    check(MPI_Ireduce_scatter(in, out, sizes.data(), mpi_type(dtype), mpi_op(dtype, ReduceOp::kSum),
                              comm_, &r),
          "MPI_Ireduce_scatter");
    // The counts' heap array moves into the Work unchanged: MPI keeps reading it.
    return std::make_unique<MpiWork>(r, watchdog_, seq, "reduce_scatter (zero2 gradient chunk)",
                                     std::move(sizes), std::move(offsets));
  }

  void barrier() override {
    CollectiveWatchdog::Scope waiting(watchdog_, "barrier", enter());
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  using Communicator::all_reduce;
  using Communicator::broadcast;

 private:
  // The arrival board: a slot per rank of this machine in shared memory, holding how many
  // collectives that rank has entered. Without shared memory (MPI could not make the window)
  // the board is absent and a timeout cannot say who is missing.
  void make_arrival_board() {
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
      return;
    MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
    MPI_Comm_rank(node, &node_rank_);
    int node_size = 0;
    MPI_Comm_size(node, &node_size);
    node_world_ranks_.assign(static_cast<size_t>(node_size), 0);
    if (MPI_Allgather(&rank_, 1, MPI_INT, node_world_ranks_.data(), 1, MPI_INT, node) !=
        MPI_SUCCESS) {
      node_world_ranks_.clear();
      return;
    }
    void* mine = nullptr;
    int ok = MPI_Win_allocate_shared(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, node, &mine,
                                     &board_window_) == MPI_SUCCESS;
    // Every rank of the machine must have its window, or none uses the board.
    int all_ok = 0;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node) != MPI_SUCCESS) all_ok = 0;
    if (!all_ok) {
      node_world_ranks_.clear();
      return;
    }
    board_.assign(static_cast<size_t>(node_size), nullptr);
    for (int j = 0; j < node_size; ++j) {
      MPI_Aint size = 0;
      int unit = 0;
      void* base = nullptr;
      MPI_Win_shared_query(board_window_, j, &size, &unit, &base);
      board_[static_cast<size_t>(j)] = static_cast<int64_t*>(base);
    }
    __atomic_store_n(board_[static_cast<size_t>(node_rank_)], 0, __ATOMIC_RELEASE);
    MPI_Barrier(node);  // every slot zeroed before any rank reads one
  }

  // Counts a collective this rank enters; its number.
  int64_t enter() {
    ++entered_;
    if (!board_.empty())
      __atomic_store_n(board_[static_cast<size_t>(node_rank_)], entered_, __ATOMIC_RELEASE);
    return entered_;
  }

  // On the watchdog's thread: names the ranks that have not entered collective `seq`, then ends
  // the job. Of the ranks waiting, the lowest reports at once; the others give it 2 s first, so
  // the job usually ends with one message.
  [[noreturn]] void on_timeout(const char* name, int64_t seq, double waited) {
    std::vector<int> missing;
    int lowest_waiting = rank_;
    for (size_t j = 0; j < board_.size(); ++j) {
      const int64_t at = __atomic_load_n(board_[j], __ATOMIC_ACQUIRE);
      if (at < seq)
        missing.push_back(node_world_ranks_[j]);
      else
        lowest_waiting = std::min(lowest_waiting, node_world_ranks_[j]);
    }
    if (lowest_waiting != rank_) std::this_thread::sleep_for(std::chrono::seconds(2));
    const bool whole_job_seen = static_cast<int>(board_.size()) == size_;
    std::string who;
    if (board_.empty()) {
      who = fmt::format(
          "rank(s) that did not arrive (unknown: no shared memory to see the others' progress; "
          "rank {} of {} reports)",
          rank_, size_);
    } else if (!missing.empty()) {
      who = fmt::format("rank(s) {} of {}, which have not reached it (rank {} reports{})",
                        fmt::join(missing, ", "), size_, rank_,
                        whole_job_seen ? "" : "; ranks on other machines not checked");
    } else {
      who =
          fmt::format("the others (rank {} of {} reports: {} reached it, but it did not complete)",
                      rank_, size_, whole_job_seen ? "every rank" : "every rank on this machine");
    }
    fmt::print(stderr,
               "mantissa: collective {} timed out after {:.0f} s waiting for {}; a rank hangs or "
               "is far slower than the others (--collective-timeout SECONDS sets the wait, 0 "
               "waits forever); aborting the job\n",
               name, waited, who);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kCollectiveTimeoutExitStatus);
    std::_Exit(kCollectiveTimeoutExitStatus);
  }

  // MPI's int counts and displacements of a collective with one count per rank.
  std::pair<std::vector<int>, std::vector<int>> counts_and_offsets(
      const std::vector<int64_t>& counts) const {
    MANTISSA_CHECK(counts.size() == static_cast<size_t>(size_), "dist.mpi",
                   "{} counts for a job of {} ranks", counts.size(), size_);
    std::vector<int> sizes, offsets;
    int64_t at = 0;
    for (int64_t c : counts) {
      sizes.push_back(to_int(c));
      offsets.push_back(to_int(at));
      at += c;
    }
    to_int(at);
    return {sizes, offsets};
  }

  static int to_int(int64_t count) {
    MANTISSA_CHECK(count <= INT_MAX, "dist.mpi",
                   "a single collective of {} elements is above "
                   "MPI's int count; split it",
                   count);
    return static_cast<int>(count);
  }
  static MPI_Datatype mpi_type(DType d) {
    if (d == kFloat32) return MPI_FLOAT;
    if (d == kFloat64) return MPI_DOUBLE;
    if (d == kInt64) return MPI_INT64_T;
    if (d == kBFloat16) return MPI_UINT16_T;
    fail("dist.mpi", "collectives take float32, bfloat16, float64 or int64 payloads, got {}",
         d.name());
  }
  MPI_Op mpi_op(DType d, ReduceOp op) const {
    if (d == kBFloat16) return bf16_ops_[static_cast<int>(op)];
    switch (op) {
      case ReduceOp::kSum:
        return MPI_SUM;
      case ReduceOp::kMax:
        return MPI_MAX;
      case ReduceOp::kMin:
        return MPI_MIN;
    }
    return MPI_SUM;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  MPI_Op bf16_ops_[3];
  int64_t entered_ = 0;  // collectives this rank has entered
  int node_rank_ = 0;
  std::vector<int> node_world_ranks_;  // world rank of each rank on this machine
  MPI_Win board_window_ = MPI_WIN_NULL;
  std::vector<int64_t*> board_;  // each rank's slot on this machine
  CollectiveWatchdog watchdog_{
      [this](const char* name, int64_t seq, double waited) { on_timeout(name, seq, waited); }};
};

}  // namespace

std::shared_ptr<Communicator> make_mpi_communicator() {
  return std::make_shared<MpiCommunicator>();
}

#else

std::shared_ptr<Communicator> make_mpi_communicator() {
  fail("dist", "{}", mpi_missing_message("the MPI communicator"));
}

#endif

}  // namespace mantissa::dist
