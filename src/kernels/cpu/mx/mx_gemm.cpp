// The block-format product (mx_gemm.h). The output is cut into tasks of up to kMs rows and all
// of N (cut into whole panels of kNb columns only where threads need more tasks; each task's
// result is the same whichever thread runs it); the fp32 accumulator is the output itself. For
// each kKc-element slice of K a task decodes its rows of A into a float panel once (element value
// times block scale, exact in fp32), then its columns of B a panel of kNb at a time, and runs the
// fp32 register tile (kernels/cpu/gemm/fp32_register_tile.h) over the panels, continuing the
// accumulator: one fma per k, in k order from 0, the same bits at every SIMD level. With AVX-512
// BF16 the panels are also packed as pairs of k steps for the bf16 register tile
// (kernels/cpu/gemm/bf16_pair_tile.h), which does the same fmas two to an instruction where the
// operands' scales keep every sum a normal number (mx_bf16_guard.h); a panel holding a NaN or
// infinity hands the rest of its task to the fp32 tile. Where
// several tasks share B's columns (more than one task of rows), B's panels of every slice are
// decoded once before the tasks, which read them from there. A bfloat16 result is summed task
// by task in a float32 buffer of the task's size and rounded as each task ends.
#include "kernels/cpu/mx/mx_gemm.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "core/convert_simd.h"
#include "kernels/cpu/gemm/bf16_pair_tile.h"
#include "kernels/cpu/gemm/code_panels.h"
#include "kernels/cpu/gemm/fp32_register_tile.h"
#include "kernels/cpu/gemm/gemm_blocking.h"
#include "kernels/cpu/mx/mx_bf16_guard.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

constexpr int64_t kMs = 512;      // output rows per task (A's slice is decoded once per task)
constexpr int64_t kNb = 256;      // columns of B's panel
constexpr int64_t kKc = 256;      // K per packed slice: a multiple of both block lengths
constexpr int64_t kKp = kKc / 2;  // pairs of k steps per slice (the bf16 tile's panels)
// The most floats of B decoded once for all tasks (larger B's are decoded by each task).
constexpr int64_t kMaxSharedB = int64_t{4} << 20;
constexpr int64_t kAcols = 64;  // A's columns decoded from its stored rows at a time
constexpr int64_t kMaxR = kFp32TileMaxRows;
constexpr int64_t kMaxC = kFp32TileMaxCols;
// The value of every code byte as an element and as a block scale.
struct Tables {
  std::array<float, 256> e4m3, e5m2, e2m1, e8m0, e4m3_scale;
  Tables() {
    for (int c = 0; c < 256; ++c) {
      const auto u = static_cast<uint8_t>(c);
      e4m3[c] = scalar::e4m3_value(u);
      e5m2[c] = scalar::e5m2_value(u);
      e2m1[c] = scalar::kE2m1Values[c & 15];
      e8m0[c] = scalar::e8m0_value(u);
      e4m3_scale[c] = scalar::e4m3_value(u);
    }
  }
  const float* element(Element e) const {
    return e == Element::kE4m3 ? e4m3.data() : (e == Element::kE5m2 ? e5m2.data() : e2m1.data());
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

// The panels are not cleared: an edge tile's rows and columns past the task's end read
// whatever is there and are dropped.
struct Panels {
  std::unique_ptr<float[]> a;  // [kMs + kMaxR][kKc]; rows past the task's end are never stored
  // [kNb / C][kKc][C]: strips of the register tile's width C, each k-major, so a register tile
  // reads its strip contiguously; columns past the panel's end are never stored. Not made
  // where B's panels are shared.
  std::unique_ptr<float[]> b;
  std::unique_ptr<float[]> rows;  // [16][kKc]: B's stored rows on their way to the panel
  // [kKc][kAcols]: A's stored rows (V = X^T, blocks along X's columns) on their way to its panel
  std::unique_ptr<float[]> a_rows;
  // Where the bf16 tile runs: a and b as pairs of k steps ([kMs + kMaxR][kKp] and
  // [kNb / C][kKp][C]; b16 not used where B's panels are shared), the thread's kept buffers.
  uint32_t *a16 = nullptr, *b16 = nullptr;
  Panels(bool own_b, bool pairs)
      : a(std::make_unique_for_overwrite<float[]>((kMs + kMaxR) * kKc)),
        b(own_b ? std::make_unique_for_overwrite<float[]>(kKc * kNb) : nullptr),
        rows(own_b ? std::make_unique_for_overwrite<float[]>(16 * kKc) : nullptr),
        a_rows(std::make_unique_for_overwrite<float[]>(kKc * kAcols)) {
    if (pairs) {
      a16 = pair_panel_buffer(0, (kMs + kMaxR) * kKp);
      b16 = pair_panel_buffer(1, kKp * kNb);
    }
  }
};

// B's panels of every slice and panel of kNb columns, decoded once: panel q of slice s (each
// laid out as Panels::b) at data + (s * panels + q) * kKc * kNb.
// Where the bf16 tile runs, each panel also as pairs (Panels::b16's layout) at
// pairs + (s * panels + q) * kKp * kNb, and whether packing found its values fit (pairs_ok).
struct SharedB {
  std::unique_ptr<float[]> data;
  uint32_t* pairs = nullptr;  // the calling thread's kept buffer (pair_panel_buffer)
  std::unique_ptr<bool[]> pairs_ok;
  int64_t panels = 0;
  int64_t index(int64_t k0, int64_t q0) const { return k0 / kKc * panels + q0 / kNb; }
  const float* at(int64_t k0, int64_t q0) const { return data.get() + index(k0, q0) * kKc * kNb; }
};

// B's decoded panel (nlen columns, strips of C) as pairs into b16; false where a value of it
// does not fit the bf16 tile.
bool pack_b_panel(const float* bp, int64_t nlen, int64_t kl, int64_t C, uint32_t* b16) {
  bool ok = true;
  for (int64_t j0 = 0; j0 < nlen; j0 += C)
    ok = pack_pair_strip(bp + j0 / C * kKc * C, C, std::min(C, nlen - j0), kl,
                         b16 + j0 / C * kKp * C) &&
         ok;
  return ok;
}

// How an operand's codes and scales lie: the value of each element code and scale code, the
// block length, the bytes of codes and the scales per stored row, whether codes are packed 4-bit.
struct Layout {
  const float* element_values;
  const float* scale_values;
  int64_t block, code_row, scale_row;
  bool fp4;
  bool along_columns;  // scales [ceil(rows / block)][cols] (MxBlocks::kAlongColumns)
  // The scale byte of stored element (r, c).
  int64_t scale_at(int64_t r, int64_t c) const {
    return along_columns ? r / block * scale_row + c : r * scale_row + c / block;
  }
};

Layout layout_of(const MxOperandView& v) {
  const Tables& t = tables();
  const int64_t block = v.nvfp4 ? kNvfp4Block : kMxBlock;
  const bool along_columns = v.blocks == MxBlocks::kAlongColumns;
  return {t.element(v.element),
          v.nvfp4 ? t.e4m3_scale.data() : t.e8m0.data(),
          block,
          code_bytes(v.element, v.cols),
          along_columns ? v.cols : (v.cols + block - 1) / block,
          v.element == Element::kE2m1,
          along_columns};
}

// Decodes len elements of one block (codes from element `first`, a block boundary) times its
// scale s into d with code_panels' vector decoders; false where the table loop runs instead: a
// NaN scale (whose product with a NaN element the table loop forms) or an odd 4-bit run.
bool decode_block_vector(const MxOperandView& v, const uint8_t* codes, int64_t first, int64_t len,
                         float s, float* d) {
  if (s != s) return false;
  if (v.element == Element::kE2m1) {
    if (len % 2 != 0) return false;
    code_panels::decode_e2m1(codes + first / 2, len, s, d);
  } else if (v.element == Element::kE4m3) {
    const float* ev = tables().e4m3.data();
    code_panels::decode_e4m3(codes + first, len, s, {ev[0x7F], ev[0xFF]}, d);
  } else {
    code_panels::decode_e5m2(codes + first, len, s, d);
  }
  return true;
}

// Decodes V(i, k0 + k) for k < kl into dst[k * step]; `vec`: code_panels' decoders may run.
[[gnu::always_inline]] inline void decode_line(const MxOperandView& v, int64_t i, int64_t k0,
                                               int64_t kl, float* dst, int64_t step,
                                               bool vec = false) {
  const Layout l = layout_of(v);
  const float *ev = l.element_values, *sv = l.scale_values;
  const int64_t block = l.block, code_row = l.code_row, scale_row = l.scale_row;
  const bool fp4 = l.fp4;
  if (!v.transposed) {  // stored row i, columns k0.. (a block boundary): blocks along K
    const uint8_t* codes = v.codes + i * code_row;
    const uint8_t* scales = v.scales + i * scale_row + k0 / block;
    // The row's blocks in one vector call where no scale is NaN (and a 4-bit run is even);
    // E2M1's decoder takes a scale per 16 elements.
    if (vec && step == 1 && (!fp4 || kl % 2 == 0)) {
      const int64_t per = fp4 ? 16 : block;
      const int half = per < block ? 1 : 0;  // E2M1 in 32-element blocks: two scales a block
      float s[kKc / 16];
      bool nan = false;
      for (int64_t q = 0; q * per < kl; ++q) {
        s[q] = sv[scales[q >> half]];
        nan = nan || s[q] != s[q];
      }
      if (!nan) {
        if (fp4)
          code_panels::decode_e2m1_blocks(codes + k0 / 2, kl, s, dst, kKc, kKc);
        else if (v.element == Element::kE4m3)
          code_panels::decode_e4m3_blocks(codes + k0, kl, block, s, {ev[0x7F], ev[0xFF]}, dst);
        else
          code_panels::decode_e5m2_blocks(codes + k0, kl, block, s, dst);
        return;
      }
    }
    for (int64_t b0 = 0; b0 < kl; b0 += block) {
      const float s = sv[scales[b0 / block]];
      const int64_t len = std::min(block, kl - b0);
      float* d = dst + b0 * step;
      if (vec && step == 1 && decode_block_vector(v, codes, k0 + b0, len, s, d)) continue;
      if (fp4) {
        const uint8_t* c = codes + (k0 + b0) / 2;  // k0 + b0 is even
        for (int64_t k = 0; k < len; ++k) d[k * step] = ev[(c[k >> 1] >> ((k & 1) * 4)) & 15] * s;
      } else {
        const uint8_t* c = codes + k0 + b0;
        for (int64_t k = 0; k < len; ++k) d[k * step] = ev[c[k]] * s;
      }
    }
  } else {  // stored column i, rows k0..
    const int64_t byte = fp4 ? i >> 1 : i;
    const int shift = fp4 ? static_cast<int>(i & 1) * 4 : 0;
    for (int64_t k = 0; k < kl; ++k) {
      const int64_t r = k0 + k;
      const auto code = static_cast<uint8_t>(v.codes[r * code_row + byte] >> shift);
      dst[k * step] = ev[code] * sv[v.scales[l.scale_at(r, i)]];
    }
  }
}

// Stored row r, columns c0.. (n of them, c0 even) of X with blocks along its columns, each value
// times its block's scale (s: the n columns' scale values in r's block row), into out: the
// values decoded unscaled by code_panels (the table's bits) and multiplied as the table loop
// multiplies, value times scale; an odd E2M1 run through the table.
void decode_column_blocks_row(const MxOperandView& v, const Layout& l, int64_t r, int64_t c0,
                              int64_t n, const float* s, float* out) {
  const uint8_t* codes = v.codes + r * l.code_row;
  if (l.fp4 && n % 2 != 0) {
    for (int64_t j = 0; j < n; ++j)
      out[j] = l.element_values[(codes[(c0 + j) >> 1] >> (((c0 + j) & 1) * 4)) & 15] * s[j];
    return;
  }
  if (l.fp4) {
    code_panels::decode_e2m1(codes + c0 / 2, n, 1.0f, out);
  } else if (v.element == Element::kE4m3) {
    const float* ev = l.element_values;
    code_panels::decode_e4m3(codes + c0, n, 1.0f, {ev[0x7F], ev[0xFF]}, out);
  } else {
    code_panels::decode_e5m2(codes + c0, n, 1.0f, out);
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] = out[j] * s[j];
}

// The scale values of columns c0..c0 + n - 1 in block row r / block of X (blocks along its
// columns).
void column_scales(const MxOperandView& v, const Layout& l, int64_t r, int64_t c0, int64_t n,
                   float* s) {
  const uint8_t* row = v.scales + r / l.block * l.scale_row + c0;
  for (int64_t j = 0; j < n; ++j) s[j] = l.scale_values[row[j]];
}

// A's panel where V = X^T with blocks along X's columns: V's rows m0.. (mlen) over the slice
// k0.. (kl) are X's columns m0.. over its rows k0..; X's rows decoded kAcols columns at a time
// into `rows` ([kKc][kAcols]) and transposed into the panel (rows kKc floats apart).
void decode_a_column_blocks(const MxOperandView& v, int64_t m0, int64_t mlen, int64_t k0,
                            int64_t kl, float* ap, float* rows) {
  const Layout l = layout_of(v);
  float s[kAcols];
  for (int64_t j0 = 0; j0 < mlen; j0 += kAcols) {
    const int64_t n = std::min(kAcols, mlen - j0);
    for (int64_t k = 0; k < kl; ++k) {
      const int64_t r = k0 + k;
      if (k == 0 || r % l.block == 0) column_scales(v, l, r, m0 + j0, n, s);
      decode_column_blocks_row(v, l, r, m0 + j0, n, s, rows + k * kAcols);
    }
    code_panels::transpose_into(rows, kAcols, kl, n, ap + j0 * kKc, kKc);
  }
}

// B's panel where V = X^T with blocks along X's columns: the panel's row k is X's row k0 + k,
// columns n0.., each value times its column's scale in the block row holding k0 + k, decoded
// straight into the strips of width C (strips of kKc rows; C a multiple of 16); an odd E2M1
// run through the table.
void decode_b_column_blocks(const MxOperandView& v, int64_t n0, int64_t nlen, int64_t k0,
                            int64_t kl, float* bp, int64_t C) {
  const Layout l = layout_of(v);
  const int64_t strip = kKc * C;
  const code_panels::E4m3Nans nans{l.element_values[0x7F], l.element_values[0xFF]};
  float s[kNb];
  for (int64_t k = 0; k < kl; ++k) {
    const int64_t r = k0 + k;
    if (k == 0 || r % l.block == 0) column_scales(v, l, r, n0, nlen, s);
    const uint8_t* codes = v.codes + r * l.code_row;
    float* d = bp + k * C;
    if (l.fp4 && nlen % 2 != 0) {
      for (int64_t j = 0; j < nlen; ++j)
        d[j / C * strip + j % C] =
            l.element_values[(codes[(n0 + j) >> 1] >> (((n0 + j) & 1) * 4)) & 15] * s[j];
    } else if (l.fp4) {
      code_panels::decode_e2m1_scaled_strips(codes + n0 / 2, nlen, s, d, C, strip);
    } else if (v.element == Element::kE4m3) {
      code_panels::decode_e4m3_scaled_strips(codes + n0, nlen, s, nans, d, C, strip);
    } else {
      code_panels::decode_e5m2_scaled_strips(codes + n0, nlen, s, d, C, strip);
    }
  }
}

// B's panel where V = X^T (16x16 tiles, read down their columns): the panel's row k is stored
// row k0 + k, columns n0.., so each block of a stored row is decoded straight into the strip of
// width C holding it (strips of kKc rows, a block never crosses one: C is a multiple of 16).
void decode_stored_rows(const MxOperandView& v, int64_t n0, int64_t nlen, int64_t k0, int64_t kl,
                        float* bp, int64_t C) {
  const Layout l = layout_of(v);
  const int64_t strip = kKc * C;
  for (int64_t k = 0; k < kl; ++k) {
    const int64_t r = k0 + k;
    const uint8_t* codes = v.codes + r * l.code_row;
    const uint8_t* scales = v.scales + r * l.scale_row;
    if (l.fp4 && nlen % 2 == 0 && n0 % l.block == 0) {  // the row's E2M1 blocks, no scale NaN
      const int half = l.block > 16 ? 1 : 0;            // 32-element blocks: two scales a block
      float s[kNb / 16];
      bool nan = false;
      for (int64_t q = 0; q * 16 < nlen; ++q) {
        s[q] = l.scale_values[scales[n0 / l.block + (q >> half)]];
        nan = nan || s[q] != s[q];
      }
      if (!nan) {
        code_panels::decode_e2m1_blocks(codes + n0 / 2, nlen, s, bp + k * C, C, strip);
        continue;
      }
    }
    for (int64_t b0 = 0; b0 < nlen; b0 += l.block) {
      const int64_t c = n0 + b0, len = std::min(l.block, nlen - b0);
      const float s = l.scale_values[scales[c / l.block]];
      float* d = bp + b0 / C * strip + k * C + b0 % C;
      if (decode_block_vector(v, codes, c, len, s, d)) continue;
      for (int64_t j = 0; j < len; ++j) {
        const auto code = static_cast<uint8_t>(
            l.fp4 ? (codes[(c + j) >> 1] >> (((c + j) & 1) * 4)) & 15 : codes[c + j]);
        d[j] = l.element_values[code] * s;
      }
    }
  }
}

// Decodes V(i0 + j, k0 + b0 + k) for j < n (at most 16), k < len (one block, b0 a block
// boundary) into dst[k * ldk + j] with the table: s holds the n rows' block scales.
void decode_columns_block(const MxOperandView& v, int64_t i0, int64_t n, int64_t k0, int64_t b0,
                          int64_t len, const float* s, float* dst, int64_t ldk) {
  const Layout l = layout_of(v);
  const float* ev = l.element_values;
  const uint8_t* rows[16];
  for (int64_t j = 0; j < n; ++j)
    rows[j] = v.codes + (i0 + j) * l.code_row + (l.fp4 ? (k0 + b0) / 2 : k0 + b0);
  if (l.fp4) {
    for (int64_t k = 0; k < len; ++k) {
      float* d = dst + (b0 + k) * ldk;
      const int shift = static_cast<int>(k & 1) * 4;
      for (int64_t j = 0; j < n; ++j) d[j] = ev[(rows[j][k >> 1] >> shift) & 15] * s[j];
    }
  } else {
    for (int64_t k = 0; k < len; ++k) {
      float* d = dst + (b0 + k) * ldk;
      for (int64_t j = 0; j < n; ++j) d[j] = ev[rows[j][k]] * s[j];
    }
  }
}

// Decodes V(i0 + j, k0 + k) for j < n (at most 16), k < kl into dst[k * ldk + j]: B's panel.
// Blocks along K only (V = X). With `vec`, E4M3 and E2M1 blocks are decoded and transposed in
// registers (code_panels.h) and E5M2 rows decoded into `scratch` ([16][kKc]) and transposed;
// a block with a NaN scale (or an odd 4-bit run) goes through the table.
void decode_columns(const MxOperandView& v, int64_t i0, int64_t n, int64_t k0, int64_t kl,
                    float* dst, int64_t ldk, float* scratch, bool vec) {
  if (vec && v.element == Element::kE5m2) {
    for (int64_t j = 0; j < n; ++j) decode_line(v, i0 + j, k0, kl, scratch + j * kKc, 1, true);
    code_panels::transpose_into(scratch, kKc, n, kl, dst, ldk);
    return;
  }
  const Layout l = layout_of(v);
  const float* ev = l.element_values;
  float s[16];
  for (int64_t b0 = 0; b0 < kl; b0 += l.block) {
    const int64_t len = std::min(l.block, kl - b0);
    bool table = !vec || (l.fp4 && len % 2 != 0);
    for (int64_t j = 0; j < n; ++j) {
      s[j] = l.scale_values[v.scales[(i0 + j) * l.scale_row + (k0 + b0) / l.block]];
      table = table || s[j] != s[j];
    }
    if (table) {
      decode_columns_block(v, i0, n, k0, b0, len, s, dst, ldk);
    } else if (l.fp4) {
      code_panels::decode_e2m1_transposed(v.codes + i0 * l.code_row + (k0 + b0) / 2, l.code_row, n,
                                          len, dst + b0 * ldk, ldk, s);
    } else {
      code_panels::decode_e4m3_transposed(v.codes + i0 * l.code_row + k0 + b0, l.code_row, n, len,
                                          {ev[0x7F], ev[0xFF]}, dst + b0 * ldk, ldk, s);
    }
  }
}

// B's panel for columns n0.. (nlen of them, at most kNb) and the slice k0.. (kl of it): strips
// of the register tile's width C, each k-major.
void decode_b_panel(const Fp32RegisterTile& lv, bool vec, const MxOperandView& b, int64_t n0,
                    int64_t nlen, int64_t k0, int64_t kl, float* bp, float* rows) {
  const int64_t C = lv.cols, strip = kKc * C;
  if (b.transposed && vec && b.blocks == MxBlocks::kAlongColumns) {
    decode_b_column_blocks(b, n0, nlen, k0, kl, bp, C);
  } else if (b.transposed && vec) {
    decode_stored_rows(b, n0, nlen, k0, kl, bp, C);
  } else if (b.transposed) {
    for (int64_t j = 0; j < nlen; ++j)
      decode_line(b, n0 + j, k0, kl, bp + j / C * strip + j % C, C);
  } else {
    const int64_t g = std::min<int64_t>(16, C);  // within one strip
    for (int64_t j = 0; j < nlen; j += g)
      decode_columns(b, n0 + j, std::min(g, nlen - j), k0, kl, bp + j / C * strip + j % C, C, rows,
                     vec);
  }
}

// One task: output rows m0.. (mlen, at most kMs), columns n0.. (nlen) over all of K into out
// (the task's first element, rows ldo apart), the accumulator, not read before the first slice
// (whose sums start at 0). For each slice the
// task's rows of A are decoded once, then its columns of B a panel of kNb at a time. Register
// tiles that cross the task's edge run on a copy of their part of the accumulator.
void task(const Fp32RegisterTile& lv, const Bf16PairTile* bt, bool vec, const MxOperandView& a,
          const MxOperandView& b, int64_t m0, int64_t mlen, int64_t n0, int64_t nlen, int64_t K,
          float* out, int64_t ldo, Panels& p, const SharedB& shared) {
  float* ap = p.a.get();
  float edge[kMaxR * kMaxC];
  const int64_t C = lv.cols, strip = kKc * C, strip16 = kKp * C;
  // The bf16 tile runs (bt) until a panel holds a value it cannot take (a NaN or infinity):
  // from there on the fp32 tile, whose sums may then leave the bf16 tile's range.
  bool pairs = bt != nullptr;
  if (K == 0)
    for (int64_t i = 0; i < mlen; ++i) std::fill_n(out + i * ldo, nlen, 0.0f);
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int64_t kl = std::min(kKc, K - k0);
    const bool first = k0 == 0;
    if (a.transposed && vec && a.blocks == MxBlocks::kAlongColumns)
      decode_a_column_blocks(a, m0, mlen, k0, kl, ap, p.a_rows.get());
    else
      for (int64_t i = 0; i < mlen; ++i) decode_line(a, m0 + i, k0, kl, ap + i * kKc, 1, vec);
    const int64_t kp = (kl + 1) / 2;
    pairs = pairs && pack_pair_rows(ap, kKc, mlen, kl, p.a16, kKp);
    for (int64_t q0 = n0; q0 < n0 + nlen; q0 += kNb) {
      const int64_t ql = std::min(kNb, n0 + nlen - q0);
      const float* bp = p.b.get();
      const uint32_t* bp16 = p.b16;
      if (shared.data) {
        bp = shared.at(k0, q0);
        if (pairs) {
          bp16 = shared.pairs + shared.index(k0, q0) * kKp * kNb;
          pairs = shared.pairs_ok[shared.index(k0, q0)];
        }
      } else {
        decode_b_panel(lv, vec, b, q0, ql, k0, kl, p.b.get(), p.rows.get());
        pairs = pairs && pack_b_panel(bp, ql, kl, C, p.b16);
      }
      // One register tile into acc (rows ldc apart), with `zero` from 0.
      auto run_tile = [&](int64_t i0, int64_t j0, float* acc, int64_t ldc, bool zero) {
        if (pairs)
          bt->fn(p.a16 + i0 * kKp, kKp, bp16 + j0 / C * strip16, C, kp, acc, ldc, zero);
        else
          lv.fn(ap + i0 * kKc, kKc, bp + j0 / C * strip, C, kl, acc, ldc, zero);
      };
      for (int64_t i0 = 0; i0 < mlen; i0 += lv.rows) {
        const int64_t rows = std::min<int64_t>(lv.rows, mlen - i0);
        for (int64_t j0 = 0; j0 < ql; j0 += lv.cols) {
          const int64_t cols = std::min<int64_t>(lv.cols, ql - j0);
          float* acc = out + i0 * ldo + (q0 - n0) + j0;
          if (rows == lv.rows && cols == lv.cols) {
            run_tile(i0, j0, acc, ldo, first);
            continue;
          }
          std::fill(edge, edge + kMaxR * kMaxC, 0.0f);
          if (!first)
            for (int64_t r = 0; r < rows; ++r)
              std::copy(acc + r * ldo, acc + r * ldo + cols, edge + r * lv.cols);
          run_tile(i0, j0, edge, lv.cols, false);
          for (int64_t r = 0; r < rows; ++r)
            std::copy(edge + r * lv.cols, edge + r * lv.cols + cols, acc + r * ldo);
        }
      }
    }
  }
}

}  // namespace

namespace {

// mx_gemm into out (float32) or out_bf16 (the rounded result; each task's sums in a float32
// buffer of the task's size, rounded when the task ends).
void run(const MxOperandView& a, const MxOperandView& b, int64_t M, int64_t N, int64_t K,
         float alpha, const float* bias, float* out, uint16_t* out_bf16, SimdLevel level) {
  MANTISSA_CHECK(M >= 0 && N >= 0 && K >= 0, "block-format gemm", "bad shape {} x {} x {}", M, N,
                 K);
  if (M == 0 || N == 0) return;
  const Fp32RegisterTile lv = fp32_register_tile(level);
  const bool vec = code_panels::available(level);
  // The bf16 tile where the CPU has it and the operands' scales keep every sum in its range.
  const Bf16PairTile* bt = bf16_pair_tile(level);
  if (bt && !bf16_sums_exact(a, b, K)) bt = nullptr;
  const bool parallel = M * N * K > (int64_t{1} << 18);
  const int64_t threads = parallel ? std::max(1, omp_get_max_threads()) : 1;
  // Tasks of up to kMs rows and all of N (A's slice decoded once), split where threads need
  // more of them.
  const gemm_blocking::DecodeOnceTasks tasks =
      gemm_blocking::decode_once_tasks(M, N, kNb, kMs, threads);
  // Task rows rounded up to whole register tiles (at most kMs + kMaxR - 1, which A's panel
  // holds), so that only the last row task has a tile cut by its edge.
  const int64_t ms = gemm_blocking::ceil_div(tasks.rows, lv.rows) * lv.rows;
  const int64_t mt = gemm_blocking::ceil_div(M, ms), nb = tasks.cols, nt = tasks.col_count;
  // A rounded result's task sums: rows start on cache lines and are not a multiple of 4 KiB
  // apart (rows that far apart share L1 sets, and the register tile touches up to eight).
  const int64_t sum_stride = (std::min(nb, N) + 15) / 16 * 16 + 16;
  // Where tasks of rows share B's columns, B's panels decoded once (column tasks start at a
  // whole panel).
  SharedB shared;
  const int64_t slices = gemm_blocking::ceil_div(K, kKc), panels = gemm_blocking::ceil_div(N, kNb);
  if (mt > 1 && slices * panels * kKc * kNb <= kMaxSharedB) {
    shared.panels = panels;
    shared.data = std::make_unique_for_overwrite<float[]>(slices * panels * kKc * kNb);
    if (bt) {
      shared.pairs = pair_panel_buffer(2, slices * panels * kKp * kNb);
      shared.pairs_ok = std::make_unique<bool[]>(slices * panels);
    }
#pragma omp parallel for collapse(2) schedule(static) if (parallel && slices * panels > 1)
    for (int64_t s = 0; s < slices; ++s) {
      for (int64_t q = 0; q < panels; ++q) {
        const int64_t k0 = s * kKc, q0 = q * kNb, ql = std::min(kNb, N - q0);
        const int64_t kl = std::min(kKc, K - k0), at = s * panels + q;
        std::unique_ptr<float[]> rows = std::make_unique_for_overwrite<float[]>(16 * kKc);
        float* bp = shared.data.get() + at * kKc * kNb;
        decode_b_panel(lv, vec, b, q0, ql, k0, kl, bp, rows.get());
        if (bt)
          shared.pairs_ok[at] = pack_b_panel(bp, ql, kl, lv.cols, shared.pairs + at * kKp * kNb);
      }
    }
  }
  // Tensor::to's rounding of float32 rows (the same bits at every level).
  const convert_detail::ToHalfWidth round = convert_detail::f32_to_bf16_kernel();
#pragma omp parallel if (parallel && mt * nt > 1)
  {
    Panels p(!shared.data, bt != nullptr);
    std::unique_ptr<float[]> sums;  // the task's float32 sums where the result is rounded
    if (out_bf16) sums = std::make_unique_for_overwrite<float[]>(std::min(ms, M) * sum_stride);
#pragma omp for collapse(2) schedule(static)
    for (int64_t ib = 0; ib < mt; ++ib) {
      for (int64_t jb = 0; jb < nt; ++jb) {
        const int64_t m0 = ib * ms, mlen = std::min(ms, M - m0);
        const int64_t n0 = jb * nb, nlen = std::min(nb, N - n0);
        float* acc = out_bf16 ? sums.get() : out + m0 * N + n0;
        const int64_t ldo = out_bf16 ? sum_stride : N;
        task(lv, bt, vec, a, b, m0, mlen, n0, nlen, K, acc, ldo, p, shared);
        // The epilogue, in vectors (omp simd: separate multiply and add, as written). An MX
        // product's alpha is 1, whose multiplication changes no value (the accumulator holds no
        // signalling NaN), so it is skipped.
        for (int64_t i = 0; i < mlen; ++i) {
          float* o = acc + i * ldo;
          const float* bj = bias ? bias + n0 : nullptr;
          if (alpha == 1.0f && bj) {
#pragma omp simd
            for (int64_t j = 0; j < nlen; ++j) o[j] = o[j] + bj[j];
          } else if (bj) {
#pragma omp simd
            for (int64_t j = 0; j < nlen; ++j) o[j] = o[j] * alpha + bj[j];
          } else if (alpha != 1.0f) {
#pragma omp simd
            for (int64_t j = 0; j < nlen; ++j) o[j] = o[j] * alpha;
          }
        }
        if (out_bf16)
          for (int64_t i = 0; i < mlen; ++i)
            round(acc + i * ldo, out_bf16 + (m0 + i) * N + n0, nlen);
      }
    }
  }
}

}  // namespace

void mx_gemm(const MxOperandView& a, const MxOperandView& b, int64_t M, int64_t N, int64_t K,
             float alpha, const float* bias, float* out, SimdLevel level) {
  run(a, b, M, N, K, alpha, bias, out, nullptr, level);
}

void mx_gemm(const MxOperandView& a, const MxOperandView& b, int64_t M, int64_t N, int64_t K,
             float alpha, const float* bias, uint16_t* out, SimdLevel level) {
  run(a, b, M, N, K, alpha, bias, nullptr, out, level);
}

}  // namespace mantissa::kernels::mx
