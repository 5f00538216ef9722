// Float reductions (see reducekernel.hpp). Each output's steps stay in order, so the speed comes
// from running eight outputs side by side: their chains of additions are independent, and the
// CPU overlaps them. When the eight outputs' inputs lie side by side, one vector holds them; when
// they are eight separate rows (a per-channel sum over an image), eight consecutive inputs of
// each row are loaded as vectors and transposed, so again one vector step advances all eight.
#include "reducekernel.hpp"

#include "simd8.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

// a fused multiply-add would skip the rounding of a square's product, which the numerics keep
#pragma GCC optimize("fp-contract=off")

namespace poplar_host {
namespace {

using simd8::V8;
using simd8::transpose8;
constexpr std::size_t B = 8;

// (vectors by reference: inlined anyway, and no 32-byte vector crosses a call without AVX)
template <ReduceStep S> __attribute__((always_inline)) inline void step(V8 &a, const V8 &v) {
  if (S == ReduceStep::Add) a = a + v;
  else if (S == ReduceStep::SquareAdd) a = a + v * v;
  else if (S == ReduceStep::Mul) a = a * v;
  else if (S == ReduceStep::Max) a = ((v > a) | (v != v)) ? v : a;
  else a = ((v < a) | (v != v)) ? v : a;
}

template <ReduceStep S> __attribute__((always_inline)) inline void step(float &a, float v) {
  if (S == ReduceStep::Add) a = a + v;
  else if (S == ReduceStep::SquareAdd) a = a + v * v;
  else if (S == ReduceStep::Mul) a = a * v;
  else if (S == ReduceStep::Max) a = (v > a || v != v) ? v : a;
  else a = (v < a || v != v) ? v : a;
}

/// Where each output starts.
template <ReduceStep S> constexpr float startOf() {
  return S == ReduceStep::Mul   ? 1.0f
         : S == ReduceStep::Max ? -__builtin_inff()
         : S == ReduceStep::Min ? __builtin_inff()
                                : 0.0f;
}

/// G groups of eight outputs whose inputs are eight separate rows each (rows[g * 8 + j]): eight
/// consecutive inputs of each row are loaded and transposed, so one vector step advances a group,
/// and the G groups' chains of steps are independent (the CPU overlaps them).
template <ReduceStep S, std::size_t G>
__attribute__((always_inline)) inline void reduceRows(const float *const *rows, const ReduceLayout &layout, float start,
                                                      float *acc) {
  V8 a[G];
#pragma GCC unroll 4
  for (std::size_t g = 0; g < G; ++g) a[g] = V8{} + start;
  for (const auto &run : layout.runs) {
    std::size_t q = 0;
    for (; q + B <= run.second; q += B) {
#pragma GCC unroll 4
      for (std::size_t g = 0; g < G; ++g) {
        V8 r[B], t[B];
#pragma GCC unroll 8
        for (std::size_t j = 0; j < B; ++j) std::memcpy(&r[j], rows[g * B + j] + run.first + q, sizeof(V8));
        transpose8(r, t);
#pragma GCC unroll 8
        for (std::size_t i = 0; i < B; ++i) step<S>(a[g], t[i]);
      }
    }
    for (; q < run.second; ++q)
#pragma GCC unroll 4
      for (std::size_t g = 0; g < G; ++g) {
        V8 v;
#pragma GCC unroll 8
        for (std::size_t j = 0; j < B; ++j) v[j] = rows[g * B + j][run.first + q];
        step<S>(a[g], v);
      }
  }
  std::memcpy(acc, a, sizeof a);
}

template <ReduceStep S>
__attribute__((always_inline)) inline void reduceBody(const float *x, const ReduceLayout &layout, float *acc) {
  const float start = startOf<S>();
  const std::size_t outN = layout.base.size(), k = layout.offset.size();
  const std::size_t *base = layout.base.data(), *offset = layout.offset.data();
  std::size_t o = 0;
  while (o + B <= outN) {
    if (base[o + B - 1] == base[o] + B - 1) { // the innermost dim is kept: eight neighbours
      V8 a = V8{} + start;
      const float *row = x + base[o];
      for (std::size_t p = 0; p < k; ++p) {
        V8 v;
        std::memcpy(&v, row + offset[p], sizeof v);
        step<S>(a, v);
      }
      std::memcpy(acc + o, &a, sizeof a);
      o += B;
      continue;
    }
    // up to four groups of eight at once (sixteen channels are two independent chains)
    const std::size_t groups = std::min<std::size_t>(4, (outN - o) / B);
    const float *rows[4 * B];
    for (std::size_t j = 0; j < groups * B; ++j) rows[j] = x + base[o + j];
    if (groups == 4) reduceRows<S, 4>(rows, layout, start, acc + o);
    else if (groups == 3) reduceRows<S, 3>(rows, layout, start, acc + o);
    else if (groups == 2) reduceRows<S, 2>(rows, layout, start, acc + o);
    else reduceRows<S, 1>(rows, layout, start, acc + o);
    o += groups * B;
  }
  for (; o < outN; ++o) {
    float a = start;
    for (std::size_t p = 0; p < k; ++p) step<S>(a, x[base[o] + offset[p]]);
    acc[o] = a;
  }
}

#define POPLAR_HOST_REDUCE(NAME, TARGET)                                                                             \
  TARGET void NAME(ReduceStep s, const float *x, const ReduceLayout &layout, float *acc) {                           \
    if (s == ReduceStep::Add) reduceBody<ReduceStep::Add>(x, layout, acc);                                           \
    else if (s == ReduceStep::SquareAdd) reduceBody<ReduceStep::SquareAdd>(x, layout, acc);                          \
    else if (s == ReduceStep::Mul) reduceBody<ReduceStep::Mul>(x, layout, acc);                                      \
    else if (s == ReduceStep::Max) reduceBody<ReduceStep::Max>(x, layout, acc);                                      \
    else reduceBody<ReduceStep::Min>(x, layout, acc);                                                                \
  }
// eight floats are one AVX register; without AVX the vectors are two SSE halves
POPLAR_HOST_REDUCE(reduceAvx2, __attribute__((target("avx2"))))
POPLAR_HOST_REDUCE(reduceBase, )
#undef POPLAR_HOST_REDUCE

} // namespace

ReduceLayout reduceLayout(const std::vector<std::size_t> &shape, const std::vector<bool> &reduced) {
  std::vector<std::size_t> stride(shape.size());
  std::size_t acc = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    stride[d] = acc;
    acc *= shape[d];
  }
  // the sums of the strides over every index of the dims that `which` selects, row-major
  const auto positions = [&](bool which) {
    std::vector<std::size_t> out{0};
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (reduced[d] != which) continue;
      std::vector<std::size_t> next;
      next.reserve(out.size() * shape[d]);
      for (std::size_t p : out)
        for (std::size_t i = 0; i < shape[d]; ++i) next.push_back(p + i * stride[d]);
      out.swap(next);
    }
    return out;
  };
  ReduceLayout layout{positions(false), positions(true), {}};
  for (std::size_t p = 0; p < layout.offset.size(); ++p) {
    if (p > 0 && layout.offset[p] == layout.offset[p - 1] + 1) ++layout.runs.back().second;
    else layout.runs.emplace_back(layout.offset[p], 1);
  }
  return layout;
}

void reduceFloats(ReduceStep s, const float *x, const ReduceLayout &layout, float *acc) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return reduceAvx2(s, x, layout, acc);
#endif
  reduceBase(s, x, layout, acc);
}

} // namespace poplar_host
