// DistributedDataParallel's reducer: buckets, hooks, overlap bookkeeping (ddp.h).
#include "mantissa/dist/ddp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/convert.h"

namespace mantissa::dist {
namespace {

std::string describe(const std::string& name, const Tensor& t) {
  std::string s = name + " " + std::string(t.dtype().name()) + " [";
  for (size_t i = 0; i < t.shape().size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape()[i]);
  return s + "]";
}

int64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return static_cast<int64_t>(h >> 1);
}

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

void check_reduce_dtype(DType dtype) {
  MANTISSA_CHECK(dtype == kFloat32 || dtype == kBFloat16, "ddp",
                 "gradients are reduced in float32 or bfloat16, not {}", dtype.name());
}

void check_same_tensors(const NamedTensors& tensors, Communicator& comm, const std::string& what) {
  if (comm.world_size() == 1) return;
  std::string mine;
  for (const auto& [name, t] : tensors) mine += describe(name, t) + "\n";
  int64_t lo = fnv1a(mine), hi = lo;
  comm.all_reduce(&lo, 1, kInt64, ReduceOp::kMin);
  comm.all_reduce(&hi, 1, kInt64, ReduceOp::kMax);
  if (lo == hi) return;
  const std::string theirs = comm.broadcast(mine, 0);
  // The first line that differs from rank 0's, on this rank (rank 0 names the first line
  // some other rank has differently only when its own list is the longer one).
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n') {
        out.push_back(s.substr(start, i - start));
        start = i + 1;
      }
    }
    return out;
  };
  const auto a = lines(mine), b = lines(theirs);
  std::string detail = "some other rank holds a different list";
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(nothing)";
    const std::string y = i < b.size() ? b[i] : "(nothing)";
    if (x != y) {
      detail = fmt::format("{} #{}: rank {} has {}, rank 0 has {}", what, i, comm.rank(), x, y);
      break;
    }
  }
  fail("ddp",
       "the ranks built different models: their {} differ in name, dtype or shape ({}); every "
       "rank must build the same model with the same options",
       what, detail);
}

void broadcast_tensors(const NamedTensors& tensors, Communicator& comm, int root) {
  if (comm.world_size() == 1) return;
  for (const auto& [name, t] : tensors) {
    MANTISSA_CHECK(t.is_contiguous(), "ddp", "cannot broadcast '{}': it is not contiguous", name);
    comm.broadcast(t.data_ptr(), static_cast<int64_t>(t.nbytes()), root);
  }
}

DistributedDataParallel::DistributedDataParallel(NamedTensors parameters,
                                                 std::shared_ptr<Communicator> comm,
                                                 DDPOptions options)
    : comm_(std::move(comm)), options_(options) {
  MANTISSA_CHECK(comm_ != nullptr, "ddp", "no communicator");
  MANTISSA_CHECK(options_.bucket_cap_bytes > 0, "ddp", "bucket_cap_bytes must be positive, got {}",
                 options_.bucket_cap_bytes);
  check_reduce_dtype(options_.reduce_dtype);
  const bool bf16 = options_.reduce_dtype == kBFloat16;
  for (auto& [name, p] : parameters) {
    if (!p.requires_grad()) continue;
    MANTISSA_CHECK(p.is_leaf(), "ddp", "parameter '{}' is not a leaf tensor", name);
    slots_.push_back({p, 0, p.numel(), false});
  }
  // Reverse registration order: the last layers' gradients are ready first.
  bucket_of_.resize(slots_.size());
  Bucket current;
  for (size_t k = slots_.size(); k-- > 0;) {
    Slot& s = slots_[k];
    if (!current.slots.empty() && (current.numel + s.numel) * static_cast<int64_t>(sizeof(float)) >
                                      options_.bucket_cap_bytes) {
      buckets_.push_back(std::move(current));
      current = Bucket();
    }
    s.offset = current.numel;
    current.numel += s.numel;
    current.slots.push_back(k);
    bucket_of_[k] = buckets_.size();
  }
  if (!current.slots.empty()) buckets_.push_back(std::move(current));
  for (auto& b : buckets_) {
    b.buffer.resize(static_cast<size_t>(b.numel));
    if (bf16) b.packed.resize(static_cast<size_t>(b.numel));
  }
  for (size_t k = 0; k < slots_.size(); ++k) {
    hooks_.push_back(autograd::register_post_accumulate_grad_hook(
        slots_[k].param, [this, k](const Tensor&) { on_grad_ready(k); }));
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

std::vector<int64_t> DistributedDataParallel::bucket_bytes() const {
  std::vector<int64_t> out;
  for (const auto& b : buckets_) out.push_back(b.numel * static_cast<int64_t>(sizeof(float)));
  return out;
}

void DistributedDataParallel::prepare_for_backward(bool sync) {
  syncing_ = sync && comm_->world_size() > 1;
  if (!syncing_) return;
  for (auto& s : slots_) s.ready = false;
  for (auto& b : buckets_) {
    b.pending = static_cast<int64_t>(b.slots.size());
    b.launched = false;
    b.done = false;
    b.work.reset();
  }
  next_launch_ = 0;
  backward_started_ = Clock::now();
}

void DistributedDataParallel::on_grad_ready(size_t k) {
  if (!syncing_ || slots_[k].ready) return;
  slots_[k].ready = true;
  --buckets_[bucket_of_[k]].pending;
  launch_ready_buckets(/*force=*/false);
  poll();
}

void DistributedDataParallel::launch_ready_buckets(bool force) {
  while (next_launch_ < buckets_.size() && (force || buckets_[next_launch_].pending == 0)) {
    launch(buckets_[next_launch_++]);
  }
}

void DistributedDataParallel::launch(Bucket& b) {
  NoGradGuard no_grad;
  for (size_t k : b.slots) {
    const Slot& s = slots_[k];
    float* dst = b.buffer.data() + s.offset;
    const Tensor g = s.param.grad();
    if (!g.defined()) {  // no gradient reached this parameter on this rank
      std::fill(dst, dst + s.numel, 0.0f);
      continue;
    }
    const Tensor f = g.dtype() == kFloat32 ? g.contiguous() : g.to(kFloat32).contiguous();
    std::memcpy(dst, f.data<float>(), static_cast<size_t>(s.numel) * sizeof(float));
  }
  b.started = Clock::now();
  b.launched = true;
  if (options_.reduce_dtype == kBFloat16) {
    convert_f32_to_bf16(b.buffer.data(), b.packed.data(), b.numel);
    b.work = comm_->all_reduce_async(b.packed.data(), b.numel, kBFloat16, ReduceOp::kSum);
  } else {
    b.work = comm_->all_reduce_async(b.buffer.data(), b.numel, kFloat32, ReduceOp::kSum);
  }
}

void DistributedDataParallel::poll() {
  for (auto& b : buckets_) {
    if (b.launched && !b.done && b.work->test()) {
      b.done = true;
      b.finished = Clock::now();
    }
  }
}

void DistributedDataParallel::finish_backward() {
  if (!syncing_) return;
  syncing_ = false;
  const Clock::time_point backward_end = Clock::now();
  launch_ready_buckets(/*force=*/true);
  for (auto& b : buckets_) {
    if (!b.done) {
      b.work->wait();
      b.done = true;
      b.finished = Clock::now();
    }
  }
  NoGradGuard no_grad;
  const float inv_world = 1.0f / static_cast<float>(comm_->world_size());
  int64_t bytes = 0;
  const bool bf16 = options_.reduce_dtype == kBFloat16;
  for (auto& b : buckets_) {
    if (bf16) convert_bf16_to_f32(b.packed.data(), b.buffer.data(), b.numel);
    for (float& v : b.buffer) v *= inv_world;  // exact for a power-of-two world
    bytes += b.numel * static_cast<int64_t>(options_.reduce_dtype.itemsize());
    for (size_t k : b.slots) {
      const Slot& s = slots_[k];
      const float* src = b.buffer.data() + s.offset;
      Tensor g = s.param.grad();
      if (g.defined() && g.dtype() == kFloat32 && g.is_contiguous()) {
        std::memcpy(g.data<float>(), src, static_cast<size_t>(s.numel) * sizeof(float));
        continue;
      }
      Tensor avg = empty(s.param.shape(), kFloat32);
      std::memcpy(avg.data<float>(), src, static_cast<size_t>(s.numel) * sizeof(float));
      s.param.set_grad(s.param.dtype() == kFloat32 ? avg : avg.to(s.param.dtype()));
    }
  }
  const Clock::time_point end = Clock::now();
  // Union of the in-flight intervals, and its part before backward ended.
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
  for (const auto& b : buckets_) spans.emplace_back(b.started, b.finished);
  std::sort(spans.begin(), spans.end());
  double total = 0, overlapped = 0;
  for (size_t i = 0; i < spans.size();) {
    auto lo = spans[i].first, hi = spans[i].second;
    size_t j = i + 1;
    while (j < spans.size() && spans[j].first <= hi) hi = std::max(hi, spans[j++].second);
    total += seconds(hi - lo);
    if (lo < backward_end) overlapped += seconds(std::min(hi, backward_end) - lo);
    i = j;
  }
  stats_.reductions += 1;
  stats_.comm_seconds += total;
  stats_.overlapped_seconds += overlapped;
  stats_.exposed_seconds += seconds(end - backward_end);
  stats_.bytes_per_reduction = bytes;
}

}  // namespace mantissa::dist
