#pragma once
// What every oneDNN-backed kernel shares: the CPU engine, a stream per thread, and the mapping
// of mantissa's dtypes to oneDNN's.
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "kernels/cpu/common/growable_buffer.h"
#include "mantissa/core/dtype.h"
#include "mantissa/core/error.h"
#include "mantissa/kernels/kernel_paths.h"

namespace mantissa::kernels {

// The widest oneDNN ISA the CPU features allow, once MANTISSA_DISABLE_SIMD has turned some off
// (cpu_features.h): so that `MANTISSA_DISABLE_SIMD=avx512f` models an AVX2 CPU for oneDNN's
// kernels too, not only for mantissa's. ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA), when set,
// is left to decide. Called before oneDNN's first ISA-dependent call (the engine, the ISA name);
// oneDNN accepts the limit only then.
void limit_onednn_isa_to_cpu_features();

// One engine for the process (thread-safe lazy initialisation of a function-local static).
inline dnnl::engine& cpu_engine() {
  static dnnl::engine eng = [] {
    limit_onednn_isa_to_cpu_features();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return eng;
}

// Streams are not meant to be shared between threads; each thread gets its own.
inline dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

// A scratchpad per thread, grown on demand: the primitives are created with a user scratchpad,
// so that concurrent executions of one cached primitive never share temporary memory.
inline void* thread_scratchpad(size_t bytes) {
  thread_local GrowableBuffer buf;
  return buf.get(bytes, "oneDNN primitive");
}

// Runs a cached primitive on this thread's stream, with this thread's scratchpad when its
// descriptor asks for one, and waits for it.
inline void execute_on_this_thread(const dnnl::primitive& prim, const dnnl::memory::desc& scratch,
                                   std::unordered_map<int, dnnl::memory>& args) {
  if (const size_t bytes = scratch.get_size(); bytes > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(scratch, cpu_engine(), thread_scratchpad(bytes)));
  dnnl::stream& s = thread_stream();
  prim.execute(s, args);
  s.wait();
}

// Whether this oneDNN can run bf16 matmuls and convolutions here. oneDNN 2.6 has bf16 kernels
// from AVX-512 (avx512_core: emulated dot products; avx512_core_bf16: native) up; on an
// AVX2-only CPU it has none, and the callers widen bf16 to fp32 and round the result once.
// Probed once by creating a tiny bf16 matmul (ONEDNN_MAX_CPU_ISA is honoured).
inline bool onednn_supports_bf16() {
  static const bool ok = [] {
    using dnnl::memory;
    const memory::desc md({2, 2}, memory::data_type::bf16, memory::format_tag::ab);
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

// Whether bf16 matmuls and convolutions go to oneDNN's native bf16 kernels: the CPU has bf16
// dot products (AVX-512 BF16 or AMX) and this oneDNN dispatches bf16 here. Elsewhere the callers
// widen bf16 to fp32: without AVX-512 oneDNN has no bf16 kernels, and with AVX-512 alone it
// emulates the dot products, several times slower than fp32.
inline bool onednn_native_bf16() { return has_native_bf16() && onednn_supports_bf16(); }

// float32 and bfloat16 (the dtypes our oneDNN paths run), float16 (only as the caller's side of
// a conversion: no oneDNN kernel here computes in it); `op` names the caller in the error.
inline dnnl::memory::data_type to_dnnl(DType dt, const char* op) {
  if (dt == kFloat32) return dnnl::memory::data_type::f32;
  if (dt == kBFloat16) return dnnl::memory::data_type::bf16;
  if (dt == kFloat16) return dnnl::memory::data_type::f16;
  if (dt == kInt8) return dnnl::memory::data_type::s8;    // LLM.int8's codes
  if (dt == kInt32) return dnnl::memory::data_type::s32;  // and their exact sums
  fail(op, "oneDNN path supports float32, bfloat16, float16, int8 and int32, got {}", dt.name());
}

// The inverse of to_dnnl for the floating dtypes.
inline DType dtype_of(const dnnl::memory::desc& md) {
  switch (md.data_type()) {
    case dnnl::memory::data_type::f32:
      return kFloat32;
    case dnnl::memory::data_type::bf16:
      return kBFloat16;
    case dnnl::memory::data_type::f16:
      return kFloat16;
    default:
      fail("oneDNN", "unexpected oneDNN data type {}", static_cast<int>(md.data_type()));
  }
}

}  // namespace mantissa::kernels
