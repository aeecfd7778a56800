// float64 convolution as GEMMs (conv_f64.h). Images are taken in chunks whose im2col matrices
// fit a bounded buffer: per image and group, col [(c, ky, kx)][(oy, ox)] holds the input value
// each kernel tap reads at each output position (0 in the padding). Then, per (image, group):
//   forward:          y = W (ocg x Kc) @ col (Kc x P)
//   input gradient:   dcol = W^T @ dy, scattered back onto dx (col2im)
//   weight gradient:  dW += dy (ocg x P) @ col^T, image after image
// with Kc = ic / groups * kh * kw and P = oh * ow. The direct loops these replace visited every
// (output, tap) pair one scalar at a time (the CNN's 64-true step took ~10 s on a Zen 3).
#include "kernels/cpu/conv/conv_f64.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/gemm/gemm_f64.h"

namespace mantissa::kernels {
namespace {

// The im2col buffer of the calling thread, reused across calls.
thread_local GrowableBuffer col_buffer;

// Chunks of images whose im2col matrices take at most this many bytes together (at least one
// image per chunk): large enough for batched GEMMs over many images, small enough to stay a
// fraction of the activations.
constexpr int64_t kColBytes = int64_t{32} << 20;

struct Dims {
  int64_t icg, ocg, taps, kc, p;  // taps = kh * kw; kc = icg * taps; p = oh * ow
};

Dims dims(const ConvGeometry& g) {
  const int64_t icg = g.ic / g.groups, taps = g.kh * g.kw;
  return {icg, g.oc / g.groups, taps, icg * taps, g.oh * g.ow};
}

int64_t chunk_images(const ConvGeometry& g, const Dims& d) {
  const int64_t per_image = g.ic * d.taps * d.p * static_cast<int64_t>(sizeof(double));
  return std::clamp<int64_t>(kColBytes / per_image, 1, g.n);
}

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The output columns [lo, hi) whose input column ox * s - pad + off lies in [0, in).
void valid_range(int64_t out, int64_t in, int64_t s, int64_t pad, int64_t off, int64_t& lo,
                 int64_t& hi) {
  lo = std::clamp<int64_t>(floor_div(pad - off + s - 1, s), 0, out);
  hi = std::clamp<int64_t>(floor_div(in - 1 + pad - off, s) + 1, lo, out);
}

// Visits row (c, ky, kx) of one channel's im2col block: f(col_row, iy_row_or_null, lo, hi,
// ix0) for each output row oy, where col_row is that row's P-stretch for this oy (ow values),
// the input row is iy's (null when iy is in the padding), and columns [lo, hi) read input
// column ix0 + ox * sw.
template <typename F>
void for_each_col_row(const ConvGeometry& g, int64_t ky, int64_t kx, F&& f) {
  int64_t lo, hi;
  valid_range(g.ow, g.iw, g.sw, g.pw, kx * g.dw, lo, hi);
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
    f(oy, iy >= 0 && iy < g.ih ? iy : -1, lo, hi, kx * g.dw - g.pw);
  }
}

// col rows of channel c of one image (taps rows of P values) from that channel's input plane.
void im2col_channel(const ConvGeometry& g, const Dims& d, const double* plane, double* col) {
  for (int64_t ky = 0; ky < g.kh; ++ky)
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      double* row = col + (ky * g.kw + kx) * d.p;
      for_each_col_row(g, ky, kx, [&](int64_t oy, int64_t iy, int64_t lo, int64_t hi, int64_t ix0) {
        double* dst = row + oy * g.ow;
        if (iy < 0) {
          std::fill(dst, dst + g.ow, 0.0);
          return;
        }
        const double* src = plane + iy * g.iw + ix0;
        std::fill(dst, dst + lo, 0.0);
        if (g.sw == 1) {
          std::copy(src + lo, src + hi, dst + lo);
        } else {
          for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * g.sw];
        }
        std::fill(dst + hi, dst + g.ow, 0.0);
      });
    }
}

// plane (one channel's input gradient) += the taps rows of dcol, in (ky, kx, oy, ox) order.
void col2im_channel(const ConvGeometry& g, const Dims& d, const double* col, double* plane) {
  for (int64_t ky = 0; ky < g.kh; ++ky)
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const double* row = col + (ky * g.kw + kx) * d.p;
      for_each_col_row(g, ky, kx, [&](int64_t oy, int64_t iy, int64_t lo, int64_t hi, int64_t ix0) {
        if (iy < 0) return;
        const double* src = row + oy * g.ow;
        double* dst = plane + iy * g.iw + ix0;
        for (int64_t ox = lo; ox < hi; ++ox) dst[ox * g.sw] += src[ox];
      });
    }
}

// The im2col matrices of images [n0, n0 + cn) into col: image i's channel c at
// (i * ic + c) * taps * P, so image i's group block grp starts at (i * groups + grp) * kc * P.
void im2col_chunk(const ConvGeometry& g, const Dims& d, const double* x, int64_t n0, int64_t cn,
                  double* col) {
  const int64_t plane = g.ih * g.iw;
#pragma omp parallel for schedule(static) if (cn * g.ic > 1)
  for (int64_t t = 0; t < cn * g.ic; ++t)
    im2col_channel(g, d, x + (n0 * g.ic + t) * plane, col + t * d.taps * d.p);
}

double* col_scratch(const ConvGeometry& g, const Dims& d, int64_t cn) {
  return static_cast<double*>(
      col_buffer.get(sizeof(double) * static_cast<size_t>(cn * g.ic * d.taps * d.p), "conv2d"));
}

}  // namespace

void conv_f64_forward(const ConvGeometry& g, const double* x, const double* w, const double* bias,
                      double* y) {
  const Dims d = dims(g);
  const int64_t chunk = chunk_images(g, d);
  double* col = col_scratch(g, d, chunk);
  std::vector<int64_t> a_off, b_off, c_off;
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t cn = std::min(chunk, g.n - n0);
    im2col_chunk(g, d, x, n0, cn, col);
    a_off.clear();
    b_off.clear();
    c_off.clear();
    for (int64_t i = 0; i < cn; ++i)
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        a_off.push_back(grp * d.ocg * d.kc);
        b_off.push_back((i * g.groups + grp) * d.kc * d.p);
        c_off.push_back(((n0 + i) * g.oc + grp * d.ocg) * d.p);
      }
    GemmF64Args a;
    a.batch = cn * g.groups;
    a.M = d.ocg;
    a.N = d.p;
    a.K = d.kc;
    a.a = {w, d.kc, 1};
    a.a_offsets = a_off.data();
    a.b = {col, d.p, 1};
    a.b_offsets = b_off.data();
    a.c = y;
    a.ldc = d.p;
    a.c_offsets = c_off.data();
    gemm_f64(a);
  }
  if (bias == nullptr) return;
#pragma omp parallel for schedule(static) if (g.n * g.oc > 1)
  for (int64_t t = 0; t < g.n * g.oc; ++t) {
    const double b = bias[t % g.oc];
    for (double* v = y + t * d.p; v < y + (t + 1) * d.p; ++v) *v += b;
  }
}

void conv_f64_backward_data(const ConvGeometry& g, const double* gy, const double* w, double* gx) {
  const Dims d = dims(g);
  const int64_t chunk = chunk_images(g, d);
  double* col = col_scratch(g, d, chunk);
  const int64_t plane = g.ih * g.iw;
  std::vector<int64_t> a_off, b_off;
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t cn = std::min(chunk, g.n - n0);
    a_off.clear();
    b_off.clear();
    for (int64_t i = 0; i < cn; ++i)
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        a_off.push_back(grp * d.ocg * d.kc);
        b_off.push_back(((n0 + i) * g.oc + grp * d.ocg) * d.p);
      }
    // dcol (Kc x P) = W^T (Kc x ocg, W read transposed) @ dy (ocg x P), per (image, group), into
    // col in im2col's layout.
    GemmF64Args a;
    a.batch = cn * g.groups;
    a.M = d.kc;
    a.N = d.p;
    a.K = d.ocg;
    a.a = {w, 1, d.kc};
    a.a_offsets = a_off.data();
    a.b = {gy, d.p, 1};
    a.b_offsets = b_off.data();
    a.c = col;
    gemm_f64(a);
    // Each input channel's plane gathers from its own rows of dcol only: race-free per channel.
#pragma omp parallel for schedule(static) if (cn * g.ic > 1)
    for (int64_t t = 0; t < cn * g.ic; ++t) {
      double* dst = gx + (n0 * g.ic + t) * plane;
      std::fill(dst, dst + plane, 0.0);
      col2im_channel(g, d, col + t * d.taps * d.p, dst);
    }
  }
}

void conv_f64_backward_weight(const ConvGeometry& g, const double* x, const double* gy,
                              double* gw) {
  const Dims d = dims(g);
  const int64_t chunk = chunk_images(g, d);
  double* col = col_scratch(g, d, chunk);
  std::vector<int64_t> a_off(static_cast<size_t>(g.groups)), b_off(a_off.size());
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t cn = std::min(chunk, g.n - n0);
    im2col_chunk(g, d, x, n0, cn, col);
    // dW (ocg x Kc) [+]= dy (ocg x P) @ col^T (P x Kc, col read transposed), per group; one
    // product per image, in image order, so each weight's sum runs over the batch in a fixed
    // order.
    for (int64_t i = 0; i < cn; ++i) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        a_off[grp] = ((n0 + i) * g.oc + grp * d.ocg) * d.p;
        b_off[grp] = (i * g.groups + grp) * d.kc * d.p;
      }
      GemmF64Args a;
      a.batch = g.groups;
      a.M = d.ocg;
      a.N = d.kc;
      a.K = d.p;
      a.a = {gy, d.p, 1};
      a.a_offsets = a_off.data();
      a.b = {col, 1, d.p};
      a.b_offsets = b_off.data();
      a.c = gw;
      a.accumulate = n0 + i > 0;
      gemm_f64(a);
    }
  }
}

}  // namespace mantissa::kernels
