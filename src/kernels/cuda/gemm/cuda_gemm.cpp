// Matrix products of GPU tensors (cuda_gemm.h): cuBLASLt for float32/float16/bfloat16 with the
// bias in its epilogue, cuBLAS's strided-batched GEMM for float64 and as the fallback where
// cuBLASLt offers no algorithm, with the bias then added by a small kernel. Both libraries are
// reached through cublas_api() (opened at the first product, not linked).
//
// cuBLAS is column-major. A row-major (M, N) result C = A @ B is, read column-major, the
// (N, M) matrix C^T = B^T @ A^T, so cuBLAS is called with m = N, n = M, k = K, its first
// operand being our B and its second our A. A row-major operand X (R, C) with leading
// dimension ld is, read column-major, X^T stored (C, R) with that ld: passed as OP_N. A
// column-major one (a transposed view, stride(-2) == 1) is X itself stored (R, C): passed as
// OP_T. So: row-major X -> OP_N, layout rows = C, cols = R; column-major X -> OP_T, layout
// rows = R, cols = C; the output is (N, M) column-major with ld = N.
#include "kernels/cuda/gemm/cuda_gemm.h"

#include <fmt/format.h>

#include "mantissa/core/error.h"

#if MANTISSA_HAS_CUDA
#include <climits>
#include <map>
#include <memory>
#include <mutex>

#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "core/inplace.h"
#include "core/strided_loops.h"
#include "kernels/cuda/gemm/bias_add.h"
#include "kernels/cuda/gemm/cublas_api.h"
#endif

namespace mantissa::kernels::cuda {

#if MANTISSA_HAS_CUDA
namespace {

using mantissa::cuda::detail::current_stream;

[[noreturn]] void throw_cublas(cublasStatus_t s, const char* what, const char* file, int line) {
  throw Error(fmt::format("[matmul] cuBLAS call failed: {} returned {} ({}) at {}:{}", what,
                          cublas_api().cublasGetStatusName(s),
                          cublas_api().cublasGetStatusString(s), file, line));
}

#define MANTISSA_CUBLAS_CHECK(expr)                                 \
  do {                                                              \
    const cublasStatus_t mantissa_cublas_st_ = (expr);              \
    if (mantissa_cublas_st_ != CUBLAS_STATUS_SUCCESS)               \
      throw_cublas(mantissa_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// cuBLASLt's recommended workspace on Hopper; the same buffer serves the cuBLAS handle (both
// run on the device's one stream, so they never use it at the same time).
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// One cuBLASLt handle, one cuBLAS handle and one workspace per device, made at first use and
// kept for the process (never destroyed: the driver may be gone at static destruction).
struct DeviceHandles {
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
  void* workspace = nullptr;
  std::mutex mu;  // the handles are bound to a stream per call; one call at a time
};

// The device must be current (the caller holds a DeviceGuard).
DeviceHandles& handles_for(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<DeviceHandles>> all;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<DeviceHandles>& h = all[device];
  if (!h) {
    auto made = std::make_unique<DeviceHandles>();
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtCreate(&made->lt));
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasCreate(&made->blas));
    // Outside the caching allocator on purpose: a fixed buffer for the process's life, not a
    // tensor, so memory_allocated() keeps counting tensors only.
    MANTISSA_CUDA_CHECK(cudaMalloc(&made->workspace, kWorkspaceBytes));
    h = std::move(made);
  }
  return *h;
}

// How one operand is read: a batch of matrices at ptr + i * batch_stride elements, each
// row-major or column-major with leading dimension ld.
struct MatView {
  Tensor keep;  // keeps the memory alive (a copy when the original could not be read in place)
  const void* ptr = nullptr;
  bool col_major = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  int64_t rows = 0, cols = 0;  // R, C of the operand as the product sees it
};

// Row-major: (i, j) at i * ld + j; column-major: (i, j) at i + j * ld. Size-1 dims put no
// constraint on their stride. False when neither fits.
bool classify(int64_t R, int64_t C, int64_t sr, int64_t sc, bool& col_major, int64_t& ld) {
  const int64_t minC = std::max<int64_t>(C, 1), minR = std::max<int64_t>(R, 1);
  if (C <= 1 || sc == 1) {
    ld = R <= 1 ? minC : sr;
    if (ld >= minC) {
      col_major = false;
      return true;
    }
  }
  if (R <= 1 || sr == 1) {
    ld = C <= 1 ? minR : sc;
    if (ld >= minR) {
      col_major = true;
      return true;
    }
  }
  return false;
}

// The batch dims (all but the last two) of strides over `full` collapse into one stride:
// consecutive dims of size > 1 nest exactly. Size-1 dims are skipped. No dim of size > 1:
// stride 0 (one matrix).
bool collapse_batch(const Shape& full, const Shape& strides, int64_t& batch_stride) {
  const int64_t nb = static_cast<int64_t>(full.size()) - 2;
  bool first = true;
  int64_t prev_stride = 0, prev_size = 1;
  batch_stride = 0;
  for (int64_t d = nb - 1; d >= 0; --d) {
    if (full[d] == 1) continue;
    if (first) {
      batch_stride = strides[d];
      first = false;
    } else if (strides[d] != prev_stride * prev_size) {
      return false;
    }
    prev_stride = strides[d];
    prev_size = full[d];
  }
  return true;
}

// x read as a batch of `batch` matrices over the broadcast shape `full` (batch dims + R, C).
// A broadcast operand (batch stride 0 over several matrices) is copied too: each matrix of a
// strided batch then has its own memory, the layout every cuBLAS version documents.
MatView view_of(const Tensor& x, const Shape& full, int64_t batch) {
  const int64_t R = full[full.size() - 2], C = full.back();
  MatView v;
  v.rows = R;
  v.cols = C;
  const Shape st = kernels::broadcast_strides(x, full);
  if (classify(R, C, st[st.size() - 2], st.back(), v.col_major, v.ld) &&
      collapse_batch(full, st, v.batch_stride) && (batch == 1 || v.batch_stride != 0)) {
    v.keep = x;
    v.ptr = x.device_ptr();
    return v;
  }
  const Tensor c = x.expand(full).contiguous();
  const Shape cs = c.strides();
  const bool ok = classify(R, C, cs[cs.size() - 2], cs.back(), v.col_major, v.ld) &&
                  collapse_batch(full, cs, v.batch_stride);
  MANTISSA_CHECK(ok, "matmul", "internal error: a contiguous operand of shape {} has strides {}",
                 shape_str(full), shape_str(cs));
  if (batch > 1 && v.batch_stride == 0) v.batch_stride = R * C;  // cannot happen: R*C > 0 here
  v.keep = c;
  v.ptr = c.device_ptr();
  return v;
}

// The operand as cuBLAS's column-major call sees it (see the top of the file).
cublasOperation_t op_of(const MatView& v) { return v.col_major ? CUBLAS_OP_T : CUBLAS_OP_N; }
int64_t layout_rows(const MatView& v) { return v.col_major ? v.rows : v.cols; }
int64_t layout_cols(const MatView& v) { return v.col_major ? v.cols : v.rows; }

uint32_t alignment_of(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 1;
  while (a < 256 && addr % (2 * a) == 0) a *= 2;
  return a;
}

cudaDataType_t cuda_type_of(DType dt) {
  if (dt == kFloat32) return CUDA_R_32F;
  if (dt == kFloat16) return CUDA_R_16F;
  if (dt == kBFloat16) return CUDA_R_16BF;
  if (dt == kFloat64) return CUDA_R_64F;
  fail("matmul",
       "{} operands are not supported on CUDA devices (float64, float32, float16 and "
       "bfloat16 are)",
       dt.name());
}

// RAII for the cuBLASLt descriptors, so an exception between creation and the call leaks none.
struct LtDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDesc() {
    if (pref) cublas_api().cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublas_api().cublasLtMatrixLayoutDestroy(d);
    if (b) cublas_api().cublasLtMatrixLayoutDestroy(b);
    if (a) cublas_api().cublasLtMatrixLayoutDestroy(a);
    if (desc) cublas_api().cublasLtMatmulDescDestroy(desc);
  }
};

void make_layout(cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows, int64_t cols,
                 int64_t ld, int64_t batch, int64_t batch_stride) {
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(
      l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutSetAttribute(
        *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutSetAttribute(
        *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride, sizeof(batch_stride)));
  }
}

// Finds cuBLASLt's first algorithm for the described product D = alpha * op(A) @ op(B) (C = D,
// beta 0) and runs it on the device's stream. False when cuBLASLt has none.
bool run_lt(DeviceHandles& h, LtDesc& L, float alpha, const void* a, const void* b, void* d) {
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceCreate(&L.pref));
  const uint64_t ws = kWorkspaceBytes;
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      L.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // The default assumes 256-byte aligned pointers; views with an offset may be less aligned.
  const uint32_t al_a = alignment_of(a), al_b = alignment_of(b), al_d = alignment_of(d);
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      L.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      L.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      L.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d)));
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      L.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d)));

  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  const cublasStatus_t hs = cublas_api().cublasLtMatmulAlgoGetHeuristic(
      h.lt, L.desc, L.a, L.b, L.d, L.d, L.pref, 1, &heur, &found);
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found == 0))
    return false;
  if (hs != CUBLAS_STATUS_SUCCESS)
    throw_cublas(hs, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);

  const float beta = 0.0f;
  const cublasStatus_t ms =
      cublas_api().cublasLtMatmul(h.lt, L.desc, &alpha, a, L.a, b, L.b, &beta, d, L.d, d, L.d,
                                  &heur.algo, h.workspace, kWorkspaceBytes, current_stream());
  if (ms == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  if (ms != CUBLAS_STATUS_SUCCESS) throw_cublas(ms, "cublasLtMatmul", __FILE__, __LINE__);
  return true;
}

// D (N, M column-major) = op(A) @ op(B) (+ bias over D's rows) on cuBLASLt, where A is our b
// and B our a. False when cuBLASLt has no algorithm for it (the caller falls back).
bool lt_matmul(DeviceHandles& h, DType dt, bool allow_tf32, const MatView& our_b,
               const MatView& our_a, void* d, int64_t M, int64_t N, int64_t K, int64_t batch,
               const void* bias) {
  const cudaDataType_t type = cuda_type_of(dt);
  const cublasComputeType_t compute =
      dt == kFloat32 && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  LtDesc L;
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescCreate(&L.desc, compute, CUDA_R_32F));
  const int32_t ta = op_of(our_b), tb = op_of(our_a);
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      L.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      L.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bias != nullptr) {
    const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
        L.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
        L.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    // The bias type is left at its default, D's type: the bias has the operands' dtype.
    if (batch > 1) {
      const int64_t bias_batch_stride = 0;  // one bias for every matrix of the batch
      MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
          L.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_batch_stride,
          sizeof(bias_batch_stride)));
    }
  }
  make_layout(&L.a, type, layout_rows(our_b), layout_cols(our_b), our_b.ld, batch,
              our_b.batch_stride);
  make_layout(&L.b, type, layout_rows(our_a), layout_cols(our_a), our_a.ld, batch,
              our_a.batch_stride);
  make_layout(&L.d, type, N, M, N, batch, M * N);

  return run_lt(h, L, 1.0f, our_b.ptr, our_a.ptr, d);
}

int to_int(int64_t v, const char* what) {
  MANTISSA_CHECK(v <= INT_MAX, "matmul", "{} = {} exceeds cuBLAS's 32-bit limit for this product",
                 what, v);
  return static_cast<int>(v);
}

// The same product on cuBLAS's strided-batched GEMM (float64 always; the others where
// cuBLASLt found no algorithm), without a bias.
void blas_matmul(DeviceHandles& h, DType dt, bool allow_tf32, const MatView& our_b,
                 const MatView& our_a, void* d, int64_t M, int64_t N, int64_t K, int64_t batch) {
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasSetStream(h.blas, current_stream()));
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasSetWorkspace(h.blas, h.workspace, kWorkspaceBytes));
  const cudaDataType_t type = cuda_type_of(dt);
  const int m = to_int(N, "N"), n = to_int(M, "M"), k = to_int(K, "K");
  const int lda = to_int(our_b.ld, "the leading dimension"),
            ldb = to_int(our_a.ld, "the leading dimension"), batch_count = to_int(batch, "batch");
  const long long stride_a = our_b.batch_stride, stride_b = our_a.batch_stride, stride_d = M * N;
  if (dt == kFloat64) {
    const double alpha = 1.0, beta = 0.0;
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasGemmStridedBatchedEx(
        h.blas, op_of(our_b), op_of(our_a), m, n, k, &alpha, our_b.ptr, type, lda, stride_a,
        our_a.ptr, type, ldb, stride_b, &beta, d, type, m, stride_d, batch_count,
        CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  const cublasComputeType_t compute =
      dt == kFloat32 && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float alpha = 1.0f, beta = 0.0f;
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasGemmStridedBatchedEx(
      h.blas, op_of(our_b), op_of(our_a), m, n, k, &alpha, our_b.ptr, type, lda, stride_a,
      our_a.ptr, type, ldb, stride_b, &beta, d, type, m, stride_d, batch_count, compute,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& bias_in, bool allow_tf32) {
  const Tensor a = a_in.detach(), b = b_in.detach();
  const Tensor bias = bias_in.defined() ? bias_in.detach() : Tensor();
  MANTISSA_CHECK(
      a.is_cuda() && b.device() == a.device() && (!bias.defined() || bias.device() == a.device()),
      "matmul", "expected every operand on the same GPU, got {} and {}{}", a.device().str(),
      b.device().str(), bias.defined() ? " (bias on " + bias.device().str() + ")" : std::string());
  MANTISSA_CHECK(a.dim() >= 2 && b.dim() >= 2 && a.size(-1) == b.size(-2), "matmul",
                 "expected (..., M, K) @ (..., K, N), got shapes {} and {}", shape_str(a.shape()),
                 shape_str(b.shape()));
  const DType dt = a.dtype();
  MANTISSA_CHECK(b.dtype() == dt, "matmul", "operand dtypes differ: {} and {}", dt.name(),
                 b.dtype().name());
  (void)cuda_type_of(dt);  // throws for other dtypes
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (bias.defined()) {
    MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == N && bias.dtype() == dt, "matmul",
                   "bias must be 1-D of size {} in {}, got {} {}", N, dt.name(),
                   bias.dtype().name(), shape_str(bias.shape()));
  }
  mantissa::cuda::detail::DeviceGuard guard(a.device());

  const Shape ba(a.shape().begin(), a.shape().end() - 2);
  const Shape bb(b.shape().begin(), b.shape().end() - 2);
  Shape out_shape = broadcast_shapes(ba, bb, "matmul");
  out_shape.insert(out_shape.end(), {M, N});
  if (numel_of(out_shape) == 0) return empty(out_shape, dt, a.device());
  if (K == 0) {  // empty sum: zeros (plus the bias)
    Tensor out = zeros(out_shape, dt, a.device());
    if (bias.defined()) mantissa::detail::copy_unchecked(out, bias);
    return out;
  }
  // b without batch (a weight): fold a's batch into rows, one large GEMM instead of many.
  if (!ba.empty() && numel_of(bb) == 1 && a.is_contiguous())
    return matmul(a.view({-1, K}), b.reshape({K, N}), bias, allow_tf32).view(out_shape);

  Tensor out = empty(out_shape, dt, a.device());
  const int64_t batch = out.numel() / (M * N);
  Shape a_full(out_shape.begin(), out_shape.end() - 2), b_full = a_full;
  a_full.insert(a_full.end(), {M, K});
  b_full.insert(b_full.end(), {K, N});
  const MatView va = view_of(a, a_full, batch), vb = view_of(b, b_full, batch);

  // cuBLASLt reads the bias through its pointer; give it an aligned, contiguous one.
  Tensor bias_c;
  if (bias.defined()) {
    bias_c = bias.is_contiguous() && alignment_of(bias.device_ptr()) >= 16 ? bias : bias.clone();
  }
  DeviceHandles& h = handles_for(a.device().index);
  std::lock_guard<std::mutex> lock(h.mu);
  bool done = false;
  if (dt != kFloat64)
    done = lt_matmul(h, dt, allow_tf32, vb, va, out.device_ptr(), M, N, K, batch,
                     bias_c.defined() ? bias_c.device_ptr() : nullptr);
  if (!done) {
    blas_matmul(h, dt, allow_tf32, vb, va, out.device_ptr(), M, N, K, batch);
    if (bias_c.defined())
      mantissa::cuda::detail::launch_add_bias_rows(out.device_ptr(), bias_c.device_ptr(),
                                                   detail::cuda_scalar_of(dt, "matmul"),
                                                   out.numel() / N, N);
  }
  return out;
}

Tensor fp8_matmul_tn(const Tensor& a, const Tensor& b, float alpha, DType out_dtype,
                     const Tensor& bias) {
  MANTISSA_CHECK(a.is_cuda() && b.device() == a.device(), "fp8_gemm",
                 "expected both operands on the same GPU, got {} and {}", a.device().str(),
                 b.device().str());
  MANTISSA_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(1) && a.is_contiguous() &&
                     b.is_contiguous(),
                 "fp8_gemm", "expected contiguous (M, K) and (N, K) codes, got {} and {}",
                 shape_str(a.shape()), shape_str(b.shape()));
  auto fp8_type = [](DType dt) {
    MANTISSA_CHECK(dt.is_float8(), "fp8_gemm", "expected FP8 codes, got {}", dt.name());
    return dt == kFloat8_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
  };
  const cudaDataType_t ta = fp8_type(a.dtype()), tb = fp8_type(b.dtype());
  if (ta == CUDA_R_8F_E5M2 && tb == CUDA_R_8F_E5M2) return Tensor();  // no such FP8 kernel
  const cudaDataType_t td = cuda_type_of(out_dtype);
  MANTISSA_CHECK(out_dtype != kFloat64, "fp8_gemm",
                 "the output must be float32, float16 or "
                 "bfloat16, got {}",
                 out_dtype.name());
  mantissa::cuda::detail::DeviceGuard guard(a.device());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(0);
  Tensor out = empty({M, N}, out_dtype, a.device());
  if (M == 0 || N == 0) return out;
  if (K == 0) return mantissa::detail::zero_unchecked(out);
  DeviceHandles& h = handles_for(a.device().index);
  std::lock_guard<std::mutex> lock(h.mu);
  // Column-major, as cuBLAS sees it: D (N, M) = op_T(our b, stored K x N) @ our a (K x M):
  // "TN", the one transpose pair FP8 kernels take.
  LtDesc L;
  MANTISSA_CUBLAS_CHECK(
      cublas_api().cublasLtMatmulDescCreate(&L.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      L.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
  MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      L.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
  Tensor bias_c;
  if (bias.defined()) {
    bias_c = bias.is_contiguous() && alignment_of(bias.device_ptr()) >= 16 ? bias : bias.clone();
    const void* bias_ptr = bias_c.device_ptr();
    const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = td;
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
        L.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
        L.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)));
    MANTISSA_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
        L.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  make_layout(&L.a, tb, K, N, K, 1, 0);
  make_layout(&L.b, ta, K, M, K, 1, 0);
  make_layout(&L.d, td, N, M, N, 1, 0);
  if (!run_lt(h, L, alpha, b.device_ptr(), a.device_ptr(), out.device_ptr())) return Tensor();
  return out;
}

#else  // built without the CUDA backend: no tensor can be on a GPU

Tensor matmul(const Tensor&, const Tensor&, const Tensor&, bool) {
  throw Error("[matmul] this build has no CUDA backend");
}

Tensor fp8_matmul_tn(const Tensor&, const Tensor&, float, DType, const Tensor&) {
  throw Error("[fp8_gemm] this build has no CUDA backend");
}

#endif

}  // namespace mantissa::kernels::cuda
