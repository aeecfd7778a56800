// ChunkedGradientReduce (chunked_gradient_reduce.h): zero2's reduce-scatter of the whole
// gradients, chunk by chunk, started from the parameters' hooks during backward.
#include "train/chunked_gradient_reduce.h"

#include <algorithm>
#include <cstring>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/convert.h"

namespace mantissa::train::detail {

ChunkedGradientReduce::ChunkedGradientReduce(const std::vector<Tensor>& params,
                                             const std::vector<int64_t>& cuts,
                                             dist::Communicator& comm, int64_t chunk_bytes,
                                             DType reduce_dtype)
    : params_(params), comm_(comm), reduce_dtype_(reduce_dtype) {
  const int world = comm_.world_size();
  const int rank = comm_.rank();
  std::vector<int64_t> numels;
  for (const Tensor& p : params_) numels.push_back(p.numel());
  const int64_t total = cuts.back();
  const int64_t chunk = std::max<int64_t>(1, chunk_bytes / static_cast<int64_t>(sizeof(float)));
  mine_.assign(static_cast<size_t>(cuts[rank + 1] - cuts[rank]), 0.0f);
  chunks_of_.resize(params_.size());
  unpacked_.assign(params_.size(), 0);
  ready_.assign(params_.size(), false);
  for (int64_t start = 0; start < total; start += chunk) {
    const int64_t end = std::min(total, start + chunk);
    Chunk c;
    c.pieces = dist::pieces_of(numels, start, end);
    for (const dist::ShardPiece& piece : c.pieces) {
      if (c.tensors.empty() || c.tensors.back() != piece.tensor) c.tensors.push_back(piece.tensor);
    }
    c.counts.resize(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r)
      c.counts[r] = std::max<int64_t>(0, std::min(end, cuts[r + 1]) - std::max(start, cuts[r]));
    c.out = mine_.data() + std::max<int64_t>(0, std::max(start, cuts[rank]) - cuts[rank]);
    for (size_t t : c.tensors) {
      chunks_of_[t].push_back(chunks_.size());
      ++unpacked_[t];
    }
    c.pending = static_cast<int64_t>(c.tensors.size());
    chunks_.push_back(std::move(c));
  }
  next_ = static_cast<int64_t>(chunks_.size()) - 1;
}

ChunkedGradientReduce::~ChunkedGradientReduce() = default;

void ChunkedGradientReduce::arm_hooks() {
  armed_ = true;
  for (size_t t = 0; t < params_.size(); ++t)
    if (params_[t].requires_grad() && params_[t].is_leaf())
      hooks_.push_back(autograd::register_post_accumulate_grad_hook(
          params_[t], [this, t](const Tensor&) { on_ready(t); }));
}

void ChunkedGradientReduce::on_ready(size_t tensor) {
  if (!armed_ || ready_[tensor]) return;
  ready_[tensor] = true;
  for (size_t k : chunks_of_[tensor]) --chunks_[k].pending;
  const int64_t before = next_;
  start_ready(/*force=*/false);
  started_in_backward_ += before - next_;
  // MPI advances started collectives only inside MPI calls: ask the ones in flight.
  while (!in_flight_.empty() && chunks_[in_flight_.front()].work->test()) complete_oldest();
}

void ChunkedGradientReduce::complete_oldest() {
  Chunk& c = chunks_[in_flight_.front()];
  in_flight_.pop_front();
  c.work->wait();  // returns at once once test() said done
  c.work.reset();
  c.send = {};  // the sums are in place (bfloat16 ones are widened in finish)
  c.send_bf16 = {};
}

void ChunkedGradientReduce::start_ready(bool force) {
  while (next_ >= 0 && (force || chunks_[static_cast<size_t>(next_)].pending == 0))
    start(static_cast<size_t>(next_--));
}

void ChunkedGradientReduce::start(size_t k) {
  // At most kMaxInFlight chunks travel at once: their send buffers hold a float32 copy of the
  // gradients they carry, which would otherwise pile up to a copy of all of them.
  while (in_flight_.size() >= kMaxInFlight) complete_oldest();
  Chunk& c = chunks_[k];
  NoGradGuard no_grad;
  int64_t numel = 0;
  for (const dist::ShardPiece& piece : c.pieces) numel += piece.end - piece.begin;
  c.send.assign(static_cast<size_t>(numel), 0.0f);
  int64_t at = 0;
  for (const dist::ShardPiece& piece : c.pieces) {
    const int64_t n = piece.end - piece.begin;
    const Tensor g = params_[piece.tensor].grad();
    if (g.defined()) {  // no gradient reached this parameter on this rank: zeros
      const Tensor f = g.dtype() == kFloat32 ? g.contiguous() : g.to(kFloat32).contiguous();
      std::memcpy(c.send.data() + at, f.data<float>() + piece.begin,
                  static_cast<size_t>(n) * sizeof(float));
    }
    at += n;
  }
  // Packed: a parameter whose every chunk is packed needs its whole gradient no more.
  for (size_t t : c.tensors)
    if (--unpacked_[t] == 0) params_[t].reset_grad();
  sent_bytes_ += numel * static_cast<int64_t>(reduce_dtype_.itemsize());
  const int rank = comm_.rank();
  in_flight_.push_back(k);
  if (reduce_dtype_ != kBFloat16) {
    c.work = comm_.reduce_scatter_async(c.send.data(), c.out, c.counts, kFloat32);
    return;
  }
  c.send_bf16.resize(c.send.size());
  convert_f32_to_bf16(c.send.data(), c.send_bf16.data(), numel);
  c.send = {};
  c.mine_bf16.resize(static_cast<size_t>(c.counts[rank]));
  c.work = comm_.reduce_scatter_async(c.send_bf16.data(), c.mine_bf16.data(), c.counts, kBFloat16);
}

std::vector<float>& ChunkedGradientReduce::finish() {
  hooks_.clear();
  armed_ = false;
  start_ready(/*force=*/true);
  while (!in_flight_.empty()) complete_oldest();
  if (reduce_dtype_ == kBFloat16)
    for (const Chunk& c : chunks_)
      convert_bf16_to_f32(c.mine_bf16.data(), c.out, c.counts[comm_.rank()]);
  chunks_.clear();
  return mine_;
}

}  // namespace mantissa::train::detail
