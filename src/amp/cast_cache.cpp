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
#include "amp/cast_cache.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/anomaly.h"
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

Entry make_entry(const Tensor& src, DType target) {
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
  e.cast = src.detach().to(target);
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

Tensor cached_cast(const Tensor& src, DType target) {
  std::unique_lock lock(g_mutex);
  auto it = g_cache.find(src.impl_ptr().get());
  if (it != g_cache.end() && it->second.fresh_for(src, target)) return it->second.cast;
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
  }
  // The copies (and their nodes) are freed here, outside the lock.
}

size_t autocast_cache_size() {
  std::lock_guard lock(detail::g_mutex);
  return detail::g_cache.size();
}

}  // namespace mantissa::amp
