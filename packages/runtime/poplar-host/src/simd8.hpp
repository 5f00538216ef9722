// Eight-float vectors (GCC vector extensions: one AVX register, or two SSE halves) and an 8 x 8
// transpose, for the kernels that turn rows into columns (reductions, channels-last copies,
// packing a matrix from its columns); and a stride-2 gather in four-float vectors.
#ifndef POPLAR_HOST_SIMD8_HPP
#define POPLAR_HOST_SIMD8_HPP

#include <cstddef>
#include <cstring>

namespace poplar_host {
namespace simd8 {

typedef float V8 __attribute__((vector_size(32)));
typedef int I8 __attribute__((vector_size(32)));

/// r[j][q] -> t[q][j] for an 8 x 8 block (vectors by reference: it is always inlined, and no
/// 32-byte vector crosses a call where AVX is off).
__attribute__((always_inline)) inline void transpose8(const V8 (&r)[8], V8 (&t)[8]) {
  V8 u[8], w[8];
#pragma GCC unroll 4
  for (std::size_t k = 0; k < 8; k += 2) {
    u[k] = __builtin_shuffle(r[k], r[k + 1], I8{0, 8, 1, 9, 4, 12, 5, 13});
    u[k + 1] = __builtin_shuffle(r[k], r[k + 1], I8{2, 10, 3, 11, 6, 14, 7, 15});
  }
#pragma GCC unroll 2
  for (std::size_t k = 0; k < 8; k += 4) {
    w[k] = __builtin_shuffle(u[k], u[k + 2], I8{0, 1, 8, 9, 4, 5, 12, 13});
    w[k + 1] = __builtin_shuffle(u[k], u[k + 2], I8{2, 3, 10, 11, 6, 7, 14, 15});
    w[k + 2] = __builtin_shuffle(u[k + 1], u[k + 3], I8{0, 1, 8, 9, 4, 5, 12, 13});
    w[k + 3] = __builtin_shuffle(u[k + 1], u[k + 3], I8{2, 3, 10, 11, 6, 7, 14, 15});
  }
#pragma GCC unroll 4
  for (std::size_t k = 0; k < 4; ++k) {
    t[k] = __builtin_shuffle(w[k], w[k + 4], I8{0, 1, 2, 3, 8, 9, 10, 11});
    t[k + 4] = __builtin_shuffle(w[k], w[k + 4], I8{4, 5, 6, 7, 12, 13, 14, 15});
  }
}

/// dst[i * dstStride + j] = rows[j][i] for i, j < 8: eight runs of eight floats written as eight
/// columns (always inlined, into the callers built for AVX2).
__attribute__((always_inline)) inline void transposeBlock8(const float *const (&rows)[8], float *dst,
                                                           std::size_t dstStride) {
  V8 v[8], t[8];
#pragma GCC unroll 8
  for (std::size_t j = 0; j < 8; ++j) std::memcpy(&v[j], rows[j], sizeof(V8));
  transpose8(v, t);
#pragma GCC unroll 8
  for (std::size_t i = 0; i < 8; ++i) std::memcpy(dst + i * dstStride, &t[i], sizeof(V8));
}

/// out[j] = in[2 * j] for j < n, four at a time from two four-float vectors (one shuffle
/// instruction with SSE alone), reading nothing past in[2 * (n - 1)] (a stride-2
/// convolution's phase images).
inline void everyOther(const float *in, float *out, std::size_t n) {
  typedef float V4 __attribute__((vector_size(16)));
  typedef int I4 __attribute__((vector_size(16)));
  std::size_t j = 0;
  for (; j + 4 < n; j += 4) {
    V4 a, b;
    std::memcpy(&a, in + 2 * j, sizeof a);
    std::memcpy(&b, in + 2 * j + 4, sizeof b);
    const V4 r = __builtin_shuffle(a, b, I4{0, 2, 4, 6});
    std::memcpy(out + j, &r, sizeof r);
  }
  for (; j < n; ++j) out[j] = in[2 * j];
}

} // namespace simd8
} // namespace poplar_host

#endif
