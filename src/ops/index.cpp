// index_select and gather. Forward moves raw elements (any dtype); backward scatter-adds the
// gradient into a zero tensor in the arithmetic type, serially over the index so duplicate
// indices accumulate in a fixed order (bit-reproducible), and rounds once when stored.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/dtype_dispatch.h"
#include "mantissa/autograd/node.h"
#include "mantissa/ops/shape_ops.h"

namespace mantissa {
namespace {

// Indices as int64 after checking dtype and bounds [0, size).
std::vector<int64_t> checked_indices(const Tensor& index, int64_t size, int64_t dim,
                                     const char* name) {
  MANTISSA_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, name,
                 "index must be int64 or int32, got {}", index.dtype().name());
  std::vector<int64_t> idx = index.to(kInt64).to_vector<int64_t>();
  for (int64_t v : idx) {
    MANTISSA_CHECK(v >= 0 && v < size, name,
                   "index {} is out of bounds for dimension {} with size {}", v, dim, size);
  }
  return idx;
}

// Copies `count` elements of `itemsize` bytes.
inline void copy_elems(const unsigned char* src, unsigned char* dst, int64_t count,
                       size_t itemsize) {
  std::memcpy(dst, src, static_cast<size_t>(count) * itemsize);
}

}  // namespace

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  MANTISSA_AUTOCAST("index_select", index_select, a, dim, index);
  constexpr const char* kName = "index_select";
  MANTISSA_CHECK(index.dim() <= 1, kName, "index must be 1-D, got shape {}",
                 shape_str(index.shape()));
  const int64_t d = wrap_dim(dim, a.dim(), kName);
  // A 0-dim input acts as a 1-element vector (PyTorch).
  const Shape in_shape = a.dim() == 0 ? Shape{1} : a.shape();
  const int64_t size = in_shape[d];
  const std::vector<int64_t> idx = checked_indices(index, size, d, kName);
  const int64_t k = static_cast<int64_t>(idx.size());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= in_shape[i];
  for (size_t i = d + 1; i < in_shape.size(); ++i) inner *= in_shape[i];

  Shape out_shape = a.dim() == 0 ? Shape{} : a.shape();
  if (a.dim() > 0) out_shape[d] = k;
  Tensor x = a.detach().contiguous();
  Tensor out = empty(out_shape, a.dtype());
  const size_t isz = a.element_size();
  const auto* src = static_cast<const unsigned char*>(x.data_ptr());
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  const int64_t rows = outer * k;
#pragma omp parallel for schedule(static) if (rows * inner > kernels::kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / k, j = r % k;
    copy_elems(src + ((o * size + idx[j]) * inner) * isz, dst + r * inner * isz, inner, isz);
  }
  if (!autograd::needs_grad(a)) return out;
  // Backward groups the positions j by the row they selected (stable, so duplicates add in
  // index order): each group sums into one inner-sized fp32/f64 buffer and is stored once.
  // Groups write disjoint rows, so they run in parallel; memory stays O(k + inner) even for a
  // large embedding table.
  std::vector<int64_t> order(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t p, int64_t q) { return idx[p] < idx[q]; });
  std::vector<int64_t> group_start;  // into `order`; one extra entry marks the end
  for (int64_t i = 0; i < k; ++i)
    if (i == 0 || idx[order[i]] != idx[order[i - 1]]) group_start.push_back(i);
  group_start.push_back(k);
  struct Groups {
    std::vector<int64_t> idx, order, start;
  };
  auto groups =
      std::make_shared<const Groups>(Groups{idx, std::move(order), std::move(group_start)});
  const Shape a_shape = a.shape();
  auto backward = [a_shape, groups, outer, size, inner, k](const Tensor& grad) {
    Tensor g = grad.contiguous();
    Tensor da = zeros(a_shape, g.dtype());
    kernels::dispatch_floating(g.dtype(), kName, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = kernels::acc_t<T>;
      const T* pg = g.data<T>();
      T* pd = da.data<T>();
      const Groups& gr = *groups;
      const int64_t ngroups = static_cast<int64_t>(gr.start.size()) - 1;
      const int64_t tasks = outer * ngroups;
#pragma omp parallel for schedule(static) if (outer * k * inner > kernels::kParallelGrain && \
                                              tasks > 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t o = task / ngroups, grp = task % ngroups;
        std::vector<A> acc(static_cast<size_t>(inner), A(0));
        for (int64_t p = gr.start[grp]; p < gr.start[grp + 1]; ++p) {
          const T* row = pg + (o * k + gr.order[p]) * inner;
          for (int64_t i = 0; i < inner; ++i) acc[i] += kernels::load(row[i]);
        }
        T* dst = pd + (o * size + gr.idx[gr.order[gr.start[grp]]]) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] = kernels::store<T>(acc[i]);
      }
    });
    return std::vector<Tensor>{da};
  };
  return autograd::record(out, {a}, "IndexSelectBackward", backward);
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  MANTISSA_AUTOCAST("gather", gather, a, dim, index);
  constexpr const char* kName = "gather";
  const int64_t nd = a.dim();
  const int64_t d = wrap_dim(dim, nd, kName);
  // Same number of dims (a 0-dim tensor pairs with a 0-dim or 1-element 1-D index).
  MANTISSA_CHECK(index.dim() == nd || (nd == 0 && index.dim() <= 1), kName,
                 "index shape {} must have the same number of dimensions as input shape {}",
                 shape_str(index.shape()), shape_str(a.shape()));
  const Shape a_shape = a.shape();
  const Shape in_shape = nd == 0 ? Shape{1} : a_shape;
  const Shape in_strides = nd == 0 ? Shape{1} : a.strides();
  const Shape ix_shape = index.dim() == 0 ? Shape{1} : index.shape();
  for (size_t i = 0; i < in_shape.size(); ++i) {
    MANTISSA_CHECK(static_cast<int64_t>(i) == d || ix_shape[i] <= in_shape[i], kName,
                   "index shape {} exceeds input shape {} in dimension {}",
                   shape_str(index.shape()), shape_str(a.shape()), i);
  }
  const std::vector<int64_t> idx = checked_indices(index, in_shape[d], d, kName);
  const int64_t n = static_cast<int64_t>(idx.size());
  const int64_t rank = static_cast<int64_t>(in_shape.size());

  // Element offsets (relative to the input's first element) of each gathered element, from
  // the index's own row-major position and the given strides.
  auto offsets_for = [&](const Shape& strides) {
    std::vector<int64_t> off(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n > kernels::kParallelGrain)
    for (int64_t p = 0; p < n; ++p) {
      int64_t rem = p, o = 0;
      for (int64_t q = rank - 1; q >= 0; --q) {
        const int64_t c = rem % ix_shape[q];
        rem /= ix_shape[q];
        o += (q == d ? idx[p] : c) * strides[q];
      }
      off[p] = o;
    }
    return off;
  };

  const std::vector<int64_t> src_off = offsets_for(in_strides);
  Tensor out = empty(index.shape(), a.dtype());
  const size_t isz = a.element_size();
  const auto* src = static_cast<const unsigned char*>(a.data_ptr());
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  // Element moves as same-size words, whatever the dtype.
  auto move = [&](auto word) {
    using W = decltype(word);
    const W* s = reinterpret_cast<const W*>(src);
    W* o = reinterpret_cast<W*>(dst);
#pragma omp parallel for schedule(static) if (n > kernels::kParallelGrain)
    for (int64_t p = 0; p < n; ++p) o[p] = s[src_off[p]];
  };
  switch (isz) {
    case 1:
      move(uint8_t{});
      break;
    case 2:
      move(uint16_t{});
      break;
    case 4:
      move(uint32_t{});
      break;
    case 8:
      move(uint64_t{});
      break;
    default:
      fail(kName, "not supported for complex tensors (dtype {})", a.dtype().name());
  }
  if (!autograd::needs_grad(a)) return out;

  // Backward scatters into a fresh contiguous gradient: offsets with contiguous strides.
  const Shape contig = contiguous_strides(in_shape);
  auto offsets = std::make_shared<const std::vector<int64_t>>(
      in_strides == contig ? src_off : offsets_for(contig));
  return autograd::record(out, {a}, "GatherBackward", [a_shape, offsets](const Tensor& grad) {
    Tensor g = grad.contiguous();
    Tensor da = empty(a_shape, g.dtype());
    kernels::dispatch_floating(g.dtype(), kName, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = kernels::acc_t<T>;
      std::vector<A> acc(static_cast<size_t>(da.numel()), A(0));
      const T* pg = g.data<T>();
      const auto& off = *offsets;
      for (size_t p = 0; p < off.size(); ++p) acc[off[p]] += kernels::load(pg[p]);
      T* pd = da.data<T>();
      for (size_t i = 0; i < acc.size(); ++i) pd[i] = kernels::store<T>(acc[i]);
    });
    return std::vector<Tensor>{da};
  });
}

}  // namespace mantissa
