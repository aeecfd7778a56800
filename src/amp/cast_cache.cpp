// The weight-cast cache. Process-wide and guarded by a mutex, as in PyTorch 2.x; cleared when a
// thread's outermost autocast region exits (clear_autocast_cache).
//
// Staleness. An entry must never hand out a copy of old weight values. It is dropped (and the
// weight cast again) when:
//  - the source TensorImpl died and its address was reused (weak_ptr check);
//  - the source's storage, offset, shape, strides or dtype changed (Module::to swaps the
//    storage under the same TensorImpl; so would loading into a fresh buffer);
//  - the storage's version moved: copy_/fill_/zero_ and every optimizer step bump it, so an
//    in-place write is seen even with no backward in between;
//  - a gradient flowed back through the cached copy (kept from before the version counter
//    existed; it only costs a recast after each backward inside one long region).
// Code that writes a weight through a raw data pointer must call Storage::bump_version().
//
// Casting ahead. On a GPU each cast is a kernel launch, and a step of a small model casts dozens
// of weights (two per Linear), each a launch of a few microseconds. So the cache remembers which
// GPU weights a region cast, and at the first miss of the next region casts all of those that
// are not fresh in one launch (core/cuda/tensor_transfer.h, cuda_convert_many): the same values
// bit for bit, made a little earlier in the region. Inside a CUDA graph capture that is one node
// instead of dozens (docs/cuda.md, "CUDA graphs").
#include "amp/cast_cache.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/autograd/anomaly.h"
#include "core/cuda/tensor_transfer.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/node.h"

namespace mantissa::amp {
namespace detail {
namespace {

// Backward of a cached cast: the gradient goes back to the source dtype (fp32). Unlike the
// FunctionNode that Tensor::to records, it has nothing to release after backward, so the same
// cached copy can feed several graphs (two losses in one region, retain_graph or not).
class CachedCastNode final : public autograd::Node {
 public:
  CachedCastNode(DType from, std::shared_ptr<std::atomic<bool>> consumed)
      : from_(from), consumed_(std::move(consumed)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override {
    consumed_->store(true, std::memory_order_relaxed);
    return {grad_output.to(from_)};  // no pass when it came widened (takes_widened_gradient)
  }
  std::string name() const override { return "ToCopyBackward"; }
  // Its first step is the widening to float32: a gradient handed over already widened (linear's
  // weight gradient, rounded to bf16/f16 in the GEMM's epilogue and stored as fp32) skips it.
  bool takes_widened_gradient() const override { return from_ == kFloat32; }

 private:
  DType from_;
  std::shared_ptr<std::atomic<bool>> consumed_;
};

struct Entry {
  std::weak_ptr<TensorImpl> source;
  std::weak_ptr<Storage> storage;
  uint64_t storage_version = 0;  // an in-place write (copy_, optimizer step) makes it stale
  int64_t offset = 0;
  Shape shape, strides;
  DType source_dtype;
  Tensor cast;
  std::shared_ptr<std::atomic<bool>> consumed;  // a gradient went back through `cast`

  bool fresh_for(const Tensor& src, DType target) const {
    const TensorImpl& impl = src.impl();
    const std::shared_ptr<Storage> live = storage.lock();
    if (live == nullptr || live != impl.storage || source.lock() != src.impl_ptr()) return false;
    return storage_version == live->version() && offset == impl.offset && shape == impl.shape &&
           strides == impl.strides && source_dtype == impl.dtype && cast.dtype() == target &&
           !consumed->load(std::memory_order_relaxed);
  }
};

std::mutex g_mutex;
std::unordered_map<const TensorImpl*, Entry> g_cache;
// The GPU weights this region cast, and those the previous region cast (g_mutex held).
using CastList = std::unordered_map<const TensorImpl*, std::weak_ptr<TensorImpl>>;
CastList g_region_casts, g_previous_casts;
bool g_cast_ahead_done = false;  // this region already cast the previous region's weights

// cast: src already converted to target (a contiguous copy), or undefined to convert here.
Entry make_entry(const Tensor& src, DType target, const Tensor& cast = Tensor()) {
  Entry e;
  const TensorImpl& impl = src.impl();
  e.source = src.impl_ptr();
  e.storage = impl.storage;
  e.storage_version = impl.storage->version();
  e.offset = impl.offset;
  e.shape = impl.shape;
  e.strides = impl.strides;
  e.source_dtype = impl.dtype;
  e.consumed = std::make_shared<std::atomic<bool>>(false);
  // The conversion is Tensor::to on a detached handle; the history is the node below.
  e.cast = cast.defined() ? cast : src.detach().to(target);
  auto node = std::make_shared<CachedCastNode>(impl.dtype, e.consumed);
  node->next.push_back(autograd::gradient_edge(src));
  node->input_meta.push_back({impl.shape, impl.dtype});
  TensorImpl& out = e.cast.impl();
  out.requires_grad = true;
  out.grad_fn = std::move(node);
  autograd::detail::inherit_parameter_label(e.cast, src);
  autograd::detail::check_cast_copy(e.cast, src);
  return e;
}

}  // namespace

bool cacheable(const Tensor& src, DType target) {
  // The autocast dtype of the tensor's own device: a GPU weight's cast is a GPU tensor.
  return target == get_autocast_dtype(src.device().type) && src.dtype() == kFloat32 &&
         src.requires_grad() && src.is_leaf() && is_autocast_cache_enabled() &&
         GradMode::is_enabled();
}

namespace {
// A weight the previous region cast that this one may cast ahead with src: alive, on src's
// GPU, contiguous, still cacheable and not fresh in the cache.
bool castable_ahead(const Tensor& w, const Tensor& src, DType target) {
  if (!w.defined() || w.impl_ptr() == src.impl_ptr() || w.device() != src.device() ||
      !w.is_contiguous() || !cacheable(w, target))
    return false;
  const auto it = g_cache.find(w.impl_ptr().get());
  return it == g_cache.end() || !it->second.fresh_for(w, target);
}

// On the first miss of a region for a GPU weight: src and the previous region's other weights,
// cast in one launch and entered in the cache (g_mutex held). Stale entries they replace go to
// `replaced`, to be released after unlocking.
void cast_ahead(const Tensor& src, DType target, std::vector<Entry>& replaced) {
  std::vector<Tensor> sources{src};
  for (const auto& [key, weak] : g_previous_casts) {
    if (std::shared_ptr<TensorImpl> impl = weak.lock()) {
      Tensor w(impl);
      if (castable_ahead(w, src, target)) sources.push_back(w);
    }
  }
  std::vector<Tensor> casts;
  for (const Tensor& s : sources) casts.push_back(empty(s.shape(), target, s.device()));
  mantissa::detail::cuda_convert_many(sources, casts);
  for (size_t i = 0; i < sources.size(); ++i) {
    g_region_casts[sources[i].impl_ptr().get()] = sources[i].impl_ptr();
    Entry& slot = g_cache[sources[i].impl_ptr().get()];
    replaced.push_back(std::exchange(slot, make_entry(sources[i], target, casts[i])));
  }
}
}  // namespace

Tensor cached_cast(const Tensor& src, DType target) {
  std::unique_lock lock(g_mutex);
  auto it = g_cache.find(src.impl_ptr().get());
  if (it != g_cache.end() && it->second.fresh_for(src, target)) return it->second.cast;
  if (src.is_cuda() && src.is_contiguous() && !g_cast_ahead_done) {
    g_cast_ahead_done = true;
    std::vector<Entry> replaced;  // stale entries are released after unlocking
    cast_ahead(src, target, replaced);
    Tensor cast = g_cache.at(src.impl_ptr().get()).cast;
    lock.unlock();
    return cast;
  }
  if (src.is_cuda()) g_region_casts[src.impl_ptr().get()] = src.impl_ptr();
  Entry e = make_entry(src, target);
  Tensor cast = e.cast;
  Entry old;  // a replaced entry is released after unlocking
  if (it != g_cache.end()) {
    old = std::exchange(it->second, std::move(e));
  } else {
    g_cache.emplace(src.impl_ptr().get(), std::move(e));
  }
  lock.unlock();
  return cast;
}

}  // namespace detail

void clear_autocast_cache() {
  std::unordered_map<const TensorImpl*, detail::Entry> dropped;
  {
    std::lock_guard lock(detail::g_mutex);
    dropped.swap(detail::g_cache);
    // What this region cast is what the next one casts ahead (an empty region keeps the list).
    if (!detail::g_region_casts.empty())
      detail::g_previous_casts = std::exchange(detail::g_region_casts, {});
    detail::g_cast_ahead_done = false;
  }
  // The copies (and their nodes) are freed here, outside the lock.
}

size_t autocast_cache_size() {
  std::lock_guard lock(detail::g_mutex);
  return detail::g_cache.size();
}

}  // namespace mantissa::amp
