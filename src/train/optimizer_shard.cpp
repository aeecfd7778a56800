// OptimizerShard (optimizer_shard.h): a rank's slices of an optimizer's parameters, their
// update and state, and the all-gather that puts the updated slices back together.
#include "train/optimizer_shard.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"
#include "mantissa/optim/adam8bit.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/sgd.h"
#include "train/chunked_gradient_reduce.h"
#include "train/optimizer_state_bytes.h"

namespace mantissa::train::detail {

namespace {

constexpr const char* kWhere = "zero";

// Where a part may be cut inside a tensor that any split leaves alone: a multiple of 16
// elements, so a slice starts where the whole tensor's SIMD packs and thread ranges do.
constexpr int64_t kElementAlignment = 16;

bool is_half(const Tensor& t) { return t.dtype() == kFloat16 || t.dtype() == kBFloat16; }

// The address of element `element` of a contiguous CPU tensor.
char* element_at(const Tensor& t, int64_t element) {
  return static_cast<char*>(t.data_ptr()) + element * static_cast<int64_t>(t.dtype().itemsize());
}

void copy_elements(const Tensor& dst, int64_t dst_at, const Tensor& src, int64_t src_at,
                   int64_t count) {
  if (count > 0)
    std::memcpy(element_at(dst, dst_at), element_at(src, src_at),
                static_cast<size_t>(count) * dst.dtype().itemsize());
}

// The 8-bit optimizers' blockwise buffers (one fp32 absmax per block of kBlockSize elements);
// every other state buffer has one value per parameter element.
bool is_blockwise(const std::string& buffer) { return buffer == "absmax1" || buffer == "absmax2"; }

// "state.<i>.<buffer>" -> (i, buffer).
std::pair<size_t, std::string> split_state_key(const std::string& key) {
  const size_t dot = key.find('.', 6);
  MANTISSA_CHECK(key.starts_with("state.") && dot != std::string::npos, kWhere,
                 "unexpected optimizer state tensor '{}'", key);
  return {static_cast<size_t>(std::stoull(key.substr(6, dot - 6))), key.substr(dot + 1)};
}

// The shard optimizer: `whole`'s kind, each group with the whole's options, over `groups`.
std::unique_ptr<optim::Optimizer> make_shard_optimizer(const optim::Optimizer& whole,
                                                       std::vector<std::vector<Tensor>> groups) {
  const std::string name(whole.name());
  if (const auto* a8 = dynamic_cast<const optim::Adam8bit*>(&whole)) {
    // Which parameters get 8-bit state is the whole's choice (sizes, overrides, a loaded
    // state): the shard's groups set it per slice through optim_bits (sync_group_options).
    std::unique_ptr<optim::Adam8bit> o;
    if (name == "AdamW8bit")
      o = std::make_unique<optim::AdamW8bit>(groups[0], a8->options(0));
    else
      o = std::make_unique<optim::Adam8bit>(groups[0], a8->options(0));
    for (size_t g = 1; g < groups.size(); ++g) o->add_param_group(groups[g], a8->options(g));
    return o;
  }
  if (const auto* a = dynamic_cast<const optim::Adam*>(&whole)) {
    std::unique_ptr<optim::Adam> o;
    if (name == "AdamW")
      o = std::make_unique<optim::AdamW>(groups[0], a->options(0));
    else
      o = std::make_unique<optim::Adam>(groups[0], a->options(0));
    for (size_t g = 1; g < groups.size(); ++g) o->add_param_group(groups[g], a->options(g));
    return o;
  }
  if (const auto* s = dynamic_cast<const optim::SGD*>(&whole)) {
    auto o = std::make_unique<optim::SGD>(groups[0], s->options(0));
    for (size_t g = 1; g < groups.size(); ++g) o->add_param_group(groups[g], s->options(g));
    return o;
  }
  fail(kWhere,
       "the ZeRO strategies shard SGD, Adam, AdamW, Adam8bit and AdamW8bit; this run's "
       "optimizer is {}: use strategy 'ddp'",
       name);
}

// Where `piece` starts among the elements of `pieces` laid end to end (it is one of them).
int64_t at_within(const std::vector<dist::ShardPiece>& pieces, const dist::ShardPiece& piece) {
  int64_t at = 0;
  for (const dist::ShardPiece& p : pieces) {
    if (p.tensor == piece.tensor) return at;
    at += p.end - p.begin;
  }
  return at;
}

}  // namespace

OptimizerShard::OptimizerShard(optim::Optimizer& whole, dist::Communicator& comm)
    : whole_(whole), comm_(comm), params_(whole.parameters()) {
  const bool blockwise = dynamic_cast<const optim::Adam8bit*>(&whole) != nullptr;
  std::vector<int64_t> alignments;
  for (size_t g = 0; g < whole.num_param_groups(); ++g) {
    const bool stochastic = whole.group_options(g).value("stochastic_rounding", false);
    for (const Tensor& p : whole.params(g)) {
      MANTISSA_CHECK(!p.is_cuda(), kWhere,
                     "the ZeRO strategies shard parameters in host memory; parameter {} is on {}",
                     numels_.size(), p.device().str());
      numels_.push_back(p.numel());
      alignments.push_back(blockwise                  ? optim::Adam8bit::kBlockSize
                           : stochastic && is_half(p) ? dist::kWholeTensor
                                                      : kElementAlignment);
    }
  }
  cuts_ = dist::partition_flat(numels_, alignments, comm.world_size());
  pieces_ = dist::pieces_of(numels_, cuts_[comm.rank()], cuts_[comm.rank() + 1]);
  begins_.assign(params_.size(), 0);
  slices_.resize(params_.size());
  for (const dist::ShardPiece& piece : pieces_) begins_[piece.tensor] = piece.begin;
  std::vector<std::vector<Tensor>> groups(whole.num_param_groups());
  size_t index = 0;
  for (size_t g = 0; g < whole.num_param_groups(); ++g) {
    for (size_t k = 0; k < whole.params(g).size(); ++k, ++index) {
      int64_t length = 0;
      for (const dist::ShardPiece& piece : pieces_)
        if (piece.tensor == index) length = piece.end - piece.begin;
      const Tensor& p = params_[index];
      Tensor slice = empty({length}, p.dtype());
      copy_elements(slice, 0, p.contiguous(), begins_[index], length);
      slice.requires_grad_(true);
      slices_[index] = slice;
      groups[g].push_back(slice);
    }
  }
  shard_ = make_shard_optimizer(whole, groups);
  // Options only the shard has: the 8-bit choice per slice, made by the whole.
  shard_only_options_.assign(whole.num_param_groups(), nlohmann::json::object());
  if (const auto* a8 = dynamic_cast<const optim::Adam8bit*>(&whole)) {
    for (size_t g = 0; g < whole.num_param_groups(); ++g) {
      nlohmann::json bits = nlohmann::json::object();
      for (size_t k = 0; k < whole.params(g).size(); ++k)
        bits[std::to_string(k)] = a8->uses_8bit_state(whole.params(g)[k]) ? 8 : 32;
      shard_only_options_[g] = {{"min_8bit_size", 0}, {"optim_bits", bits}};
    }
  }
  synced_options_.assign(whole.num_param_groups(), nlohmann::json());
  sync_group_options();
  take_state_from_whole();
}

bool OptimizerShard::is_for(const optim::Optimizer& whole) const {
  if (&whole != &whole_) return false;
  const std::vector<Tensor> now = whole.parameters();
  if (now.size() != params_.size()) return false;
  for (size_t i = 0; i < now.size(); ++i)
    if (!now[i].is_same(params_[i])) return false;
  return true;
}

int64_t OptimizerShard::state_bytes() const { return shard_->state_bytes(); }

void OptimizerShard::sync_group_options() {
  for (size_t g = 0; g < whole_.num_param_groups(); ++g) {
    nlohmann::json options = whole_.group_options(g);
    options.update(shard_only_options_[g]);
    if (options == synced_options_[g]) continue;
    shard_->set_group_options(g, options);
    synced_options_[g] = std::move(options);
  }
}

void OptimizerShard::take_state_from_whole() {
  bool any = false;
  for (const Tensor& p : params_)
    if (const optim::ParamState* s = whole_.state(p); s != nullptr && !s->empty()) any = true;
  if (!any) return;
  const optim::OptimizerState whole_state = whole_.state_dict();
  sync_group_options();
  optim::OptimizerState mine = shard_->state_dict();
  mine.tensors.clear();
  mine.meta["state"] = nlohmann::json::object();
  for (const auto& [key, entry] : whole_state.meta.at("state").items())
    if (slices_[std::stoull(key)].numel() > 0) mine.meta["state"][key] = entry;
  for (const auto& [key, saved] : whole_state.tensors) {
    const auto [index, buffer] = split_state_key(key);
    const int64_t length = slices_[index].numel();
    if (length == 0) continue;
    const Tensor t = saved.contiguous();
    int64_t first = begins_[index];
    int64_t count = length;
    if (is_blockwise(buffer)) {
      constexpr int64_t kBlock = optim::Adam8bit::kBlockSize;
      first = begins_[index] / kBlock;
      count = (begins_[index] + length + kBlock - 1) / kBlock - first;
    }
    MANTISSA_CHECK(first + count <= t.numel(), kWhere,
                   "optimizer state '{}' has {} elements; parameter {} has {}", key, t.numel(),
                   index, numels_[index]);
    Tensor part = empty({count}, t.dtype());
    copy_elements(part, 0, t, first, count);
    mine.tensors[key] = part;
  }
  shard_->load_state_dict(mine);
  for (const Tensor& p : params_) whole_.release_state(p);
}

void OptimizerShard::sync_from_whole() {
  take_state_from_whole();
  sync_group_options();
  if (slices_hold_values_) return;
  NoGradGuard no_grad;
  for (const dist::ShardPiece& piece : pieces_)
    copy_elements(slices_[piece.tensor], 0, params_[piece.tensor].contiguous(), piece.begin,
                  piece.end - piece.begin);
}

void OptimizerShard::take_gradient_slices() {
  NoGradGuard no_grad;
  for (const dist::ShardPiece& piece : pieces_) {
    const Tensor& slice = slices_[piece.tensor];
    const Tensor g = params_[piece.tensor].grad();
    if (!g.defined()) {
      slice.reset_grad();
      continue;
    }
    const Tensor whole_grad = g.contiguous();
    Tensor part = empty({piece.end - piece.begin}, whole_grad.dtype());
    copy_elements(part, 0, whole_grad, piece.begin, piece.end - piece.begin);
    slice.set_grad(part);
  }
  for (const Tensor& p : params_) p.reset_grad();
}

void OptimizerShard::reduce_scatter_gradients(int64_t chunk_bytes, DType reduce_dtype) {
  ChunkedGradientReduce reduce(params_, cuts_, comm_, chunk_bytes, reduce_dtype);
  take_reduced_gradients(reduce);
}

void OptimizerShard::take_reduced_gradients(ChunkedGradientReduce& reduce) {
  std::vector<float>& sums = reduce.finish();
  reduced_bytes_ = reduce.sent_bytes();
  NoGradGuard no_grad;
  set_averaged_gradients(pieces_, sums);
  for (const Tensor& p : params_) p.reset_grad();
}

Tensor OptimizerShard::global_gradient_norm() const {
  // Sums of squares per whole parameter: this rank's slices' share, then every rank's.
  std::vector<double> squares(params_.size(), 0.0);
  DType result = kFloat32;
  for (const Tensor& p : params_)
    if (p.dtype() == kFloat64) result = kFloat64;
  for (const dist::ShardPiece& piece : pieces_) {
    const Tensor g = slices_[piece.tensor].grad();
    if (!g.defined()) continue;
    const std::vector<double> v = g.to_vector<double>();
    double s = 0;
    for (double x : v) s += x * x;
    squares[piece.tensor] = s;
  }
  comm_.all_reduce(squares.data(), static_cast<int64_t>(squares.size()), kFloat64,
                   dist::ReduceOp::kSum);
  auto round_to = [&](double v) {
    return result == kFloat64 ? v : static_cast<double>(static_cast<float>(v));
  };
  double total = 0;
  for (double s : squares) {
    const double n = round_to(std::sqrt(s));
    total += n * n;
  }
  return scalar_tensor(round_to(std::sqrt(total)), result);
}

void OptimizerShard::step_shard() {
  try {
    shard_->step();
  } catch (const optim::NonFiniteGradient& e) {
    for (size_t i = 0; i < slices_.size(); ++i)
      if (slices_[i].is_same(e.parameter())) throw optim::NonFiniteGradient(e.what(), params_[i]);
    throw;
  }
  for (const Tensor& s : slices_) s.reset_grad();
}

std::vector<dist::ShardPiece> OptimizerShard::pieces_in(int r,
                                                        const std::vector<size_t>& indices) const {
  std::vector<dist::ShardPiece> out;
  int64_t offset = 0;
  size_t next = 0;
  for (size_t i = 0; i < numels_.size() && next < indices.size(); ++i) {
    if (indices[next] == i) {
      const int64_t first = std::max(offset, cuts_[r]);
      const int64_t last = std::min(offset + numels_[i], cuts_[r + 1]);
      if (first < last) out.push_back({i, first - offset, last - offset});
      ++next;
    }
    offset += numels_[i];
  }
  return out;
}

void OptimizerShard::set_averaged_gradients(const std::vector<dist::ShardPiece>& pieces,
                                            std::vector<float>& sums) {
  const float inv_world = 1.0f / static_cast<float>(comm_.world_size());
  for (float& v : sums) v *= inv_world;  // as ddp's reducer: exact for a power-of-two world
  int64_t at = 0;
  for (const dist::ShardPiece& piece : pieces) {
    const int64_t n = piece.end - piece.begin;
    Tensor avg = empty({n}, kFloat32);
    std::memcpy(avg.data<float>(), sums.data() + at, static_cast<size_t>(n) * sizeof(float));
    at += n;
    const Tensor& slice = slices_[piece.tensor];
    slice.set_grad(slice.dtype() == kFloat32 ? avg : avg.to(slice.dtype()));
  }
}

DType OptimizerShard::wire_dtype(size_t index, DType wire) const {
  return params_[index].dtype() == kFloat32 ? wire : params_[index].dtype();
}

std::vector<int64_t> OptimizerShard::pack_pieces(
    const std::vector<std::vector<dist::ShardPiece>>& parts, std::vector<char>& mine,
    DType wire) const {
  const int world = comm_.world_size();
  std::vector<int64_t> counts(static_cast<size_t>(world), 0);
  for (int r = 0; r < world; ++r)
    for (const dist::ShardPiece& piece : parts[r])
      counts[r] += (piece.end - piece.begin) *
                   static_cast<int64_t>(wire_dtype(piece.tensor, wire).itemsize());
  mine.resize(static_cast<size_t>(counts[comm_.rank()]));
  size_t at = 0;
  for (const dist::ShardPiece& piece : parts[comm_.rank()]) {
    const Tensor& s = slices_[piece.tensor];
    const DType w = wire_dtype(piece.tensor, wire);
    const int64_t n = piece.end - piece.begin;
    const char* from = element_at(s, piece.begin - begins_[piece.tensor]);
    if (w == s.dtype())
      std::memcpy(mine.data() + at, from, static_cast<size_t>(n) * w.itemsize());
    else  // float32 rounded to the wire's half dtype (nearest even)
      convert_buffer(from, s.dtype(), mine.data() + at, w, n);
    at += static_cast<size_t>(n) * w.itemsize();
  }
  return counts;
}

void OptimizerShard::unpack_pieces(const std::vector<std::vector<dist::ShardPiece>>& parts,
                                   const std::vector<char>& all, DType wire) const {
  size_t at = 0;
  for (const auto& part : parts) {
    for (const dist::ShardPiece& piece : part) {
      const Tensor& p = params_[piece.tensor];
      const DType w = wire_dtype(piece.tensor, wire);
      const int64_t n = piece.end - piece.begin;
      if (w == p.dtype())
        std::memcpy(element_at(p, piece.begin), all.data() + at,
                    static_cast<size_t>(n) * w.itemsize());
      else  // widened exactly
        convert_buffer(all.data() + at, w, element_at(p, piece.begin), p.dtype(), n);
      at += static_cast<size_t>(n) * w.itemsize();
    }
  }
}

void OptimizerShard::all_gather_pieces(const std::vector<std::vector<dist::ShardPiece>>& parts,
                                       std::vector<char>& mine, std::vector<char>& all) {
  const std::vector<int64_t> counts = pack_pieces(parts, mine, kFloat32);
  int64_t all_bytes = 0;
  for (int64_t c : counts) all_bytes += c;
  all.resize(static_cast<size_t>(all_bytes));
  comm_.all_gather_bytes(mine.data(), all.data(), counts);
  unpack_pieces(parts, all, kFloat32);
  // The step's new values, written through data pointers: what caches a parameter's values
  // (int8-training's codes, FP8's cast weight) must see them change.
  for (const auto& part : parts)
    for (const dist::ShardPiece& piece : part) params_[piece.tensor].storage()->bump_version();
}

void OptimizerShard::gather_parameters(const std::vector<size_t>& indices, DType wire) {
  const std::unique_ptr<PendingGather> g = start_gather_parameters(indices, wire, false);
  finish_gather_parameters(*g);
}

std::unique_ptr<OptimizerShard::PendingGather> OptimizerShard::start_gather_parameters(
    const std::vector<size_t>& indices, DType wire, bool non_blocking) {
  auto g = std::make_unique<PendingGather>();
  g->wire = wire;
  g->parts.resize(static_cast<size_t>(comm_.world_size()));
  for (int r = 0; r < comm_.world_size(); ++r) g->parts[r] = pieces_in(r, indices);
  const std::vector<int64_t> counts = pack_pieces(g->parts, g->mine, wire);
  int64_t all_bytes = 0;
  for (int64_t c : counts) all_bytes += c;
  g->all.resize(static_cast<size_t>(all_bytes));
  gathered_bytes_ += all_bytes;
  if (non_blocking) {
    g->work = comm_.all_gather_bytes_async(g->mine.data(), g->all.data(), counts);
  } else {
    comm_.all_gather_bytes(g->mine.data(), g->all.data(), counts);
  }
  return g;
}

void OptimizerShard::finish_gather_parameters(PendingGather& g) {
  if (g.work) g.work->wait();
  unpack_pieces(g.parts, g.all, g.wire);
  g.mine = {};
  g.all = {};
}

void OptimizerShard::reduce_scatter_gradients_of(const std::vector<size_t>& indices,
                                                 DType reduce_dtype) {
  const int world = comm_.world_size();
  const int rank = comm_.rank();
  std::vector<int64_t> counts(static_cast<size_t>(world));
  std::vector<std::vector<dist::ShardPiece>> parts(static_cast<size_t>(world));
  int64_t total = 0;
  for (int r = 0; r < world; ++r) {
    parts[r] = pieces_in(r, indices);
    counts[r] = 0;
    for (const dist::ShardPiece& piece : parts[r]) counts[r] += piece.end - piece.begin;
    total += counts[r];
  }
  NoGradGuard no_grad;
  // Rank-major: rank 0's elements of these parameters, then rank 1's, ...
  std::vector<float> send(static_cast<size_t>(total), 0.0f);
  for (size_t index : indices) {
    const Tensor g = params_[index].grad();
    if (!g.defined()) continue;
    const Tensor f = g.dtype() == kFloat32 ? g.contiguous() : g.to(kFloat32).contiguous();
    int64_t base = 0;
    for (int r = 0; r < world; ++r) {
      for (const dist::ShardPiece& piece : parts[r])
        if (piece.tensor == index)
          std::memcpy(send.data() + base + at_within(parts[r], piece),
                      f.data<float>() + piece.begin,
                      static_cast<size_t>(piece.end - piece.begin) * sizeof(float));
      base += counts[r];
    }
  }
  std::vector<float> mine(static_cast<size_t>(counts[rank]));
  reduced_bytes_ = total * static_cast<int64_t>(reduce_dtype.itemsize());
  if (reduce_dtype == kBFloat16) {
    std::vector<uint16_t> send_bf16(send.size()), mine_bf16(mine.size());
    convert_f32_to_bf16(send.data(), send_bf16.data(), total);
    comm_.reduce_scatter(send_bf16.data(), mine_bf16.data(), counts, kBFloat16);
    convert_bf16_to_f32(mine_bf16.data(), mine.data(), counts[rank]);
  } else {
    comm_.reduce_scatter(send.data(), mine.data(), counts, kFloat32);
  }
  set_averaged_gradients(parts[rank], mine);
  for (size_t index : indices) params_[index].reset_grad();
}

void OptimizerShard::step_and_gather(int64_t chunk_bytes) {
  step_shard();
  // The flat elements in chunks of at most chunk_bytes / 4 elements: each chunk's pieces, every
  // rank's end to end in rank order, in one all-gather of their bytes.
  const int world = comm_.world_size();
  const int64_t chunk = std::max<int64_t>(1, chunk_bytes / static_cast<int64_t>(sizeof(float)));
  const int64_t total = cuts_.back();
  std::vector<char> mine, all;
  NoGradGuard no_grad;
  for (int64_t start = 0; start < total; start += chunk) {
    const int64_t end = std::min(total, start + chunk);
    std::vector<std::vector<dist::ShardPiece>> parts(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      const int64_t first = std::max(start, cuts_[r]);
      const int64_t last = std::min(end, cuts_[r + 1]);
      if (first < last) parts[r] = dist::pieces_of(numels_, first, last);
    }
    all_gather_pieces(parts, mine, all);
  }
}

optim::OptimizerState OptimizerShard::gather_state() const {
  const int world = comm_.world_size();
  const optim::OptimizerState mine = shard_->state_dict();
  // Rank 0 receives each rank's state in turn (one rank's at a time in memory).
  std::vector<optim::OptimizerState> parts(static_cast<size_t>(world));
  for (int root = 0; root < world; ++root) {
    if (root == 0) {
      if (comm_.rank() == 0) parts[0] = mine;
      continue;
    }
    std::string bytes = root == comm_.rank() ? optimizer_state_to_bytes(mine) : std::string();
    int64_t size = static_cast<int64_t>(bytes.size());
    comm_.broadcast(&size, sizeof size, root);
    bytes.resize(static_cast<size_t>(size));
    comm_.broadcast(bytes.data(), size, root);
    if (comm_.rank() == 0) parts[root] = optimizer_state_from_bytes(bytes);
  }
  if (comm_.rank() != 0) return {};
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& p : params_) shapes.push_back(p.shape());
  return assemble_optimizer_state(whole_.state_dict().meta, shapes, cuts_, parts);
}

optim::OptimizerState assemble_optimizer_state(const nlohmann::json& whole_meta,
                                               const std::vector<std::vector<int64_t>>& shapes,
                                               const std::vector<int64_t>& cuts,
                                               const std::vector<optim::OptimizerState>& parts) {
  const int world = static_cast<int>(parts.size());
  std::vector<int64_t> numels;
  int64_t total = 0;
  for (const auto& shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) {
      MANTISSA_CHECK(d >= 0 && (d == 0 || n <= INT64_MAX / d), kWhere,
                     "a parameter shape of the partition is not a tensor shape");
      n *= d;
    }
    numels.push_back(n);
    total += n;
  }
  // The partition may come from a file: a cut per rank boundary, in order, over every element.
  bool cuts_fit = cuts.size() == parts.size() + 1 && cuts.front() == 0 && cuts.back() == total;
  for (size_t r = 0; cuts_fit && r + 1 < cuts.size(); ++r) cuts_fit = cuts[r] <= cuts[r + 1];
  MANTISSA_CHECK(cuts_fit, kWhere,
                 "the partition's cuts ({}) do not split {} elements over {} ranks in order",
                 fmt::join(cuts, ", "), total, world);
  for (int r = 0; r < world; ++r)
    MANTISSA_CHECK(parts[r].meta.is_object() && parts[r].meta.contains("state") &&
                       parts[r].meta.at("state").is_object(),
                   kWhere, "rank {}'s optimizer state has no \"state\" object", r);
  optim::OptimizerState out;
  out.meta = whole_meta;  // the whole's groups and options
  out.meta["state"] = nlohmann::json::object();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string id = std::to_string(i);
    // The ranks holding a piece of parameter i and their pieces.
    std::vector<std::pair<int, dist::ShardPiece>> owners;
    for (int r = 0; r < world; ++r)
      for (const dist::ShardPiece& piece : dist::pieces_of(numels, cuts[r], cuts[r + 1]))
        if (piece.tensor == i) owners.emplace_back(r, piece);
    std::vector<int> with_state;
    for (const auto& [r, piece] : owners)
      if (parts[r].meta.at("state").contains(id)) with_state.push_back(r);
    if (with_state.empty()) continue;
    MANTISSA_CHECK(with_state.size() == owners.size(), kWhere,
                   "parameter {}: rank {} holds optimizer state for its slice, but {} of the {} "
                   "ranks holding a slice do",
                   i, with_state[0], with_state.size(), owners.size());
    out.meta["state"][id] = parts[owners[0].first].meta.at("state").at(id);
    // The buffers, from the first owner's names.
    const std::string prefix = "state." + id + ".";
    for (const auto& [key, first_part] : parts[owners[0].first].tensors) {
      if (!key.starts_with(prefix)) continue;
      const std::string buffer = key.substr(prefix.size());
      constexpr int64_t kBlock = optim::Adam8bit::kBlockSize;
      const Tensor whole_buffer =
          is_blockwise(buffer) ? empty({(numels[i] + kBlock - 1) / kBlock}, first_part.dtype())
                               : empty(shapes[i], first_part.dtype());
      for (const auto& [r, piece] : owners) {
        const auto it = parts[r].tensors.find(key);
        MANTISSA_CHECK(it != parts[r].tensors.end(), kWhere,
                       "rank {} lacks the optimizer state '{}' of its slice", r, key);
        const Tensor t = it->second.contiguous();
        const int64_t first = is_blockwise(buffer) ? piece.begin / kBlock : piece.begin;
        const int64_t count = is_blockwise(buffer) ? (piece.end + kBlock - 1) / kBlock - first
                                                   : piece.end - piece.begin;
        MANTISSA_CHECK(t.dtype() == whole_buffer.dtype() && t.numel() == count &&
                           first + count <= whole_buffer.numel(),
                       kWhere, "rank {}'s optimizer state '{}' ({} {}) does not fit its slice", r,
                       key, t.numel(), t.dtype().name());
        copy_elements(whole_buffer, first, t, 0, t.numel());
      }
      out.tensors[key] = whole_buffer;
    }
  }
  return out;
}

}  // namespace mantissa::train::detail
