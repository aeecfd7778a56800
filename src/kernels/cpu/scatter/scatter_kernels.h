#pragma once
// Element moves and accumulations at precomputed element offsets: the loops behind scatter,
// scatter_add, index_add and index_put (src/ops/scatter.cpp) and their backwards. Offsets are
// in elements from the first element of a contiguous buffer; pair p moves or adds
// in[in_off[p]] to out[out_off[p]], in the order p = 0, 1, ... (serial, so duplicates resolve
// the same way every run).
#include <cstdint>
#include <vector>

#include "mantissa/core/dtype.h"
#include "mantissa/core/shape.h"

namespace mantissa::kernels {

// Offset of each element of an `index_shape`-shaped index tensor (row-major order) in a
// buffer with `strides`: coordinate `dim` is replaced by idx[p] when idx is non-null, the
// other coordinates are the element's own.
std::vector<int64_t> scatter_offsets(const Shape& index_shape, const int64_t* idx, int64_t dim,
                                     const Shape& strides);

// out[out_off[p]] = in[in_off[p]] as raw words of `itemsize` bytes (any dtype). With `keep`,
// only the pairs whose keep[p] is non-zero move. Later pairs overwrite earlier ones.
void move_elements(void* out, const int64_t* out_off, const void* in, const int64_t* in_off,
                   int64_t n, size_t itemsize, const uint8_t* keep = nullptr);

// out[off[p]] = 0 for every p.
void zero_elements(void* out, const int64_t* off, int64_t n, size_t itemsize);

// out[out_off[p]] += alpha * in[in_off[p]] for a floating dtype (f64, f32, f16, bf16). Every
// output element is accumulated in its arithmetic type (fp32 for f16/bf16, f64 for f64) and
// rounded once when stored, so many small additions into one fp16 element do not stall; the
// stored result still has the dtype's range and precision. `out_numel` sizes that buffer.
void accumulate_elements(DType dtype, void* out, int64_t out_numel, const int64_t* out_off,
                         const void* in, const int64_t* in_off, int64_t n, double alpha);

// For pairs written by a non-accumulating scatter: 1 where pair p is the last to write its
// output element (the value that survives), 0 where a later pair overwrote it.
std::vector<uint8_t> last_writers(const int64_t* out_off, int64_t n, int64_t out_numel);

}  // namespace mantissa::kernels
