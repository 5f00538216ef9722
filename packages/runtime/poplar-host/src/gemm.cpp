// The float matrix product behind poplin (see gemm.hpp): B is packed into panels of NR columns,
// block by block (KC x NC of B, MC rows of A at a time, sized for the caches), and a
// micro-kernel keeps an MR x NR block of C in vector registers while it runs along the KC
// products, reading MR rows of A where they lie. With B packed, a strip of MR rows of A stays in
// L1 while the block's panels stream past it from L2; with B's rows read in place, each panel
// stays put while the strips of A pass (its rows are too scattered to stream). C is stored
// between KC blocks and reloaded, exactly, so each element still adds its products in order
// p = 0, 1, ..., each with one fused multiply-add: the result is that of the plain loop.
#include "gemm.hpp"

#include "simd8.hpp"

#include <algorithm>
#include <atomic>
#include <string>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

// each product is added to its sum with one rounding (a fused multiply-add): the kernels for
// CPUs with FMA get it by contraction of `acc + a * b`, which tests/gemm.cpp checks bit for bit
#pragma GCC optimize("fp-contract=fast")

namespace poplar_host {
namespace {

typedef float V4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V16 __attribute__((vector_size(64)));

/// The cache blocking: products per pass (KC), rows of A per block (MC, a multiple of every MR)
/// and columns of B per block (NC, a whole number of panels).
struct Blocking {
  std::size_t KC, MC, NCMax;
};
// B packed: a strip of MR x KC of A in L1, the KC x NC block of B in L2; sized with operands
// that come from memory, not from the previous call, as they do in a model's run
constexpr Blocking kPacked{384, 96, 480};
// B read in place: a KC x NR strip of B stays in L1 and L2 while the MC rows of A pass
constexpr Blocking kInPlace{256, 192, 2048};

/// A block of C: rows x cols from c (row stride ldc).
struct NextBlock {
  const float *c = nullptr;
  int rows = 0, cols = 0;
};

/// acc[MR][NRV] (vectors of L lanes) += A strip x B panel over kc products; C is read first
/// unless `first` (then the sums start from +0), and written back. Partial blocks at the edges
/// go through a full-size scratch block.
/// B is a packed panel (row p at b + p * NR) or, with `rows`, rows read where they lie (row p at
/// b + rows[p]). A's rows are read where they lie (row i at a + i * lda; the missing rows of an
/// edge block read row mr - 1 again, and their sums are dropped): packing them cost more than the
/// eight streams of loads it saves.
/// `next` is the block of C the following call works on: asked for now, it comes from memory
/// while this block's products run.
template <class V, int MR, int NRV>
__attribute__((always_inline)) inline void microBody(std::size_t kc, const float *a, std::size_t lda, const float *b,
                                                     const std::size_t *rows, float *c, std::size_t ldc, bool first,
                                                     int mr, int nr, NextBlock next) {
  constexpr int L = sizeof(V) / sizeof(float), NR = NRV * L;
  for (int i = 0; i < next.rows; ++i)
    for (int j = 0; j < next.cols; j += 16) __builtin_prefetch(next.c + i * ldc + j, 1); // a line each
  const float *ar[MR];
  for (int i = 0; i < MR; ++i) ar[i] = a + static_cast<std::size_t>(std::min(i, mr - 1)) * lda;
  V acc[MR][NRV];
  float scratch[MR * NR];
  const bool full = mr == MR && nr == NR;
  if (first) {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NRV; ++v) acc[i][v] = V{};
  } else if (full) {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NRV; ++v) std::memcpy(&acc[i][v], c + i * ldc + v * L, sizeof(V));
  } else {
    std::fill(scratch, scratch + MR * NR, 0.0f);
    for (int i = 0; i < mr; ++i) std::memcpy(scratch + i * NR, c + i * ldc, sizeof(float) * nr);
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NRV; ++v) std::memcpy(&acc[i][v], scratch + i * NR + v * L, sizeof(V));
  }
  // the register block only stays in registers when the inner loops are unrolled completely;
  // four products a trip let the loads of one overlap the multiply-adds of another (8-12% on
  // the encoder's products)
#pragma GCC unroll 4
  for (std::size_t p = 0; p < kc; ++p) {
    V bv[NRV];
    const float *bp = rows ? b + rows[p] : b + p * NR;
#pragma GCC unroll 8
    for (int v = 0; v < NRV; ++v) std::memcpy(&bv[v], bp + v * L, sizeof(V));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const float s = ar[i][p];
      const V av = s - V{}; // one broadcast (x - 0 is x exactly, so this folds)
#pragma GCC unroll 8
      for (int v = 0; v < NRV; ++v) {
        if constexpr (sizeof(V) == sizeof(V4)) {
          // the baseline kernel's CPU may have no FMA instruction: lane by lane through fmaf
          for (int l = 0; l < L; ++l) acc[i][v][l] = __builtin_fmaf(av[l], bv[v][l], acc[i][v][l]);
        } else {
          acc[i][v] += av * bv[v]; // one instruction in the kernels built for FMA
        }
      }
    }
  }
  if (full) {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NRV; ++v) std::memcpy(c + i * ldc + v * L, &acc[i][v], sizeof(V));
  } else {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NRV; ++v) std::memcpy(scratch + i * NR + v * L, &acc[i][v], sizeof(V));
    for (int i = 0; i < mr; ++i) std::memcpy(c + i * ldc, scratch + i * NR, sizeof(float) * nr);
  }
}

using Micro = void (*)(std::size_t, const float *, std::size_t, const float *, const std::size_t *, float *,
                      std::size_t, bool, int, int, NextBlock);

// each kernel in two versions, so the test of `rows` leaves the inner loop: B packed, B in rows
#define POPLAR_HOST_MICRO(NAME, TARGET, V, MR, NRV)                                                                  \
  TARGET void NAME(std::size_t kc, const float *a, std::size_t lda, const float *b, const std::size_t *rows,         \
                   float *c, std::size_t ldc, bool first, int mr, int nr, NextBlock next) {                          \
    if (rows) microBody<V, MR, NRV>(kc, a, lda, b, rows, c, ldc, first, mr, nr, next);                               \
    else microBody<V, MR, NRV>(kc, a, lda, b, nullptr, c, ldc, first, mr, nr, next);                                 \
  }

// AVX2 with FMA: 6 x 16 of C in 12 of the 16 ymm registers, or 4 x 24 (for products of 16 or
// 32 rows, a convolution's output channels, which 6 rows would pad by an eighth)
constexpr int kAvxMR = 6, kAvxNR = 16, kAvxWideMR = 4, kAvxWideNR = 24;
POPLAR_HOST_MICRO(microAvx2, __attribute__((target("avx2,fma"))), V8, kAvxMR, 2)
POPLAR_HOST_MICRO(microAvx2x24, __attribute__((target("avx2,fma"))), V8, kAvxWideMR, 3)
// AVX-512 (which has FMA): 8 x 48 of C in 24 of the 32 zmm registers; 8 x 32 and 8 x 16 for
// the last columns of a B read in place, which a 48-wide panel would read past
constexpr int kAvx512MR = 8, kAvx512NR = 48;
POPLAR_HOST_MICRO(microAvx512, __attribute__((target("avx512f"))), V16, kAvx512MR, 3)
POPLAR_HOST_MICRO(microAvx512x32, __attribute__((target("avx512f"))), V16, kAvx512MR, 2)
POPLAR_HOST_MICRO(microAvx512x16, __attribute__((target("avx512f"))), V16, kAvx512MR, 1)
// any x86-64 (SSE2), and other targets through GCC's generic vectors: 4 x 8 of C
constexpr int kBaseMR = 4, kBaseNR = 8;
POPLAR_HOST_MICRO(microBase, , V4, kBaseMR, 2)
#undef POPLAR_HOST_MICRO

struct Kernel {
  const char *name;
  Micro micro;
  int MR, NR;
};

/// The kernels this CPU runs, fastest first.
const std::vector<Kernel> &availableKernels() {
  static const std::vector<Kernel> kernels = [] {
    std::vector<Kernel> k;
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f")) k.push_back({"avx512", microAvx512, kAvx512MR, kAvx512NR});
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      k.push_back({"avx2", microAvx2, kAvxMR, kAvxNR});
      k.push_back({"avx2-4x24", microAvx2x24, kAvxWideMR, kAvxWideNR});
    }
#endif
    k.push_back({"base", microBase, kBaseMR, kBaseNR});
    return k;
  }();
  return kernels;
}

/// The AVX-512 kernel that is `width` columns wide (16 or 32), if the AVX-512 kernel is the
/// current one; nullptr otherwise.
const Kernel *narrowAvx512(const Kernel &current, std::size_t width) {
  static const Kernel x32{"avx512", microAvx512x32, kAvx512MR, 32}, x16{"avx512", microAvx512x16, kAvx512MR, 16};
  if (current.micro != microAvx512) return nullptr;
  return width == 32 ? &x32 : width == 16 ? &x16 : nullptr;
}

std::atomic<const Kernel *> &currentKernel() {
  static std::atomic<const Kernel *> current{&availableKernels().front()};
  return current;
}

/// The kernel's block grid over an m x n product: the products it computes, padding included.
std::size_t paddedProducts(const Kernel &k, std::size_t m, std::size_t n) {
  const auto up = [](std::size_t x, std::size_t r) { return (x + r - 1) / r * r; };
  return up(m, static_cast<std::size_t>(k.MR)) * up(n, static_cast<std::size_t>(k.NR));
}

/// The kernel for an m x n product: the current one, except that at most 16 columns (a
/// classifier's few classes) would fill a third of the AVX-512 kernel's 48, where the AVX2
/// kernel's 16 fit them, and that the AVX2 kernel gives way to its 4 x 24 sibling when that
/// pads less (every kernel gives the same bits).
const Kernel &kernelFor(std::size_t m, std::size_t n) {
  // the AVX2 kernels, if this CPU runs them: looked up once, not on every product
  const auto find = [](Micro micro) -> const Kernel * {
    for (const auto &k : availableKernels())
      if (k.micro == micro) return &k;
    return nullptr;
  };
  static const Kernel *const avx2 = find(microAvx2), *const wide = find(microAvx2x24);
  const Kernel *k = currentKernel().load(std::memory_order_relaxed);
  if (k->NR == kAvx512NR && n <= static_cast<std::size_t>(kAvxNR) && avx2) k = avx2;
  if (k == avx2 && wide && paddedProducts(*wide, m, n) < paddedProducts(*k, m, n)) k = wide;
  return *k;
}

/// Rows [p, p + rows) of B's block (row q at src + q * ldb, nc columns) into each of its
/// panels: the full ones by copies of a known size the compiler inlines, a last narrower one
/// padded with zeros (NR 0: a width known only at run time, nr).
template <std::size_t NR>
void packRowsIntoPanels(const float *src, std::size_t ldb, std::size_t rows, std::size_t nc, std::size_t kc,
                        std::size_t nr, float *out) {
  const std::size_t w = NR ? NR : nr;
  std::size_t j = 0;
  for (; j + w <= nc; j += w, out += kc * w)
    for (std::size_t q = 0; q < rows; ++q) std::memcpy(out + q * w, src + q * ldb + j, w * sizeof(float));
  if (j < nc)
    for (std::size_t q = 0; q < rows; ++q) {
      std::memcpy(out + q * w, src + q * ldb + j, (nc - j) * sizeof(float));
      std::fill(out + q * w + (nc - j), out + (q + 1) * w, 0.0f);
    }
}

/// B[p0.., j0..] (kc x nc) of a row-major B as panels of NR columns, sixteen rows at a time:
/// each panel's share of them is 16 x NR floats written in one piece, while the sixteen rows are
/// read as sequential streams (row by row, every write was a jump of kc x NR floats, on a new
/// page; panel by panel, every read a jump of ldb). Packing 768 x 768 took a third of the time
/// row by row took with 16-column panels.
void packRowMajorB(const float *B, std::size_t ldb, std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc,
                   std::size_t NR, float *out) {
  constexpr std::size_t kRows = 16;
  for (std::size_t p = 0; p < kc; p += kRows) {
    const std::size_t rows = std::min(kRows, kc - p);
    const float *src = B + (p0 + p) * ldb + j0;
    float *dst = out + p * NR;
    if (NR == kAvx512NR) packRowsIntoPanels<kAvx512NR>(src, ldb, rows, nc, kc, NR, dst);
    else if (NR == kAvxNR) packRowsIntoPanels<kAvxNR>(src, ldb, rows, nc, kc, NR, dst);
    else if (NR == kAvxWideNR) packRowsIntoPanels<kAvxWideNR>(src, ldb, rows, nc, kc, NR, dst);
    else if (NR == kBaseNR) packRowsIntoPanels<kBaseNR>(src, ldb, rows, nc, kc, NR, dst);
    else packRowsIntoPanels<0>(src, ldb, rows, nc, kc, NR, dst);
  }
}

/// packColumnRuns' body: with Blocks, 8 x 8 blocks through a transpose (a store per element, a
/// panel row apart, was most of the packing's time); the rest element by element.
template <bool Blocks>
__attribute__((always_inline)) inline void packColumnRunsBody(const float *const *col, std::size_t p0, std::size_t kc,
                                                              std::size_t j0, std::size_t nc, std::size_t nr, float *out) {
  constexpr std::size_t B = 8;
  for (std::size_t q = 0; q < nc; q += nr, out += kc * nr) {
    const std::size_t w = std::min(nr, nc - q);
    const float *const *c = col + j0 + q;
    std::size_t j = 0;
    for (; Blocks && j + B <= w; j += B) {
      std::size_t p = 0;
      for (; p + B <= kc; p += B) {
        const float *const rows8[B] = {c[j] + p0 + p,     c[j + 1] + p0 + p, c[j + 2] + p0 + p, c[j + 3] + p0 + p,
                                       c[j + 4] + p0 + p, c[j + 5] + p0 + p, c[j + 6] + p0 + p, c[j + 7] + p0 + p};
        simd8::transposeBlock8(rows8, out + p * nr + j, nr);
      }
      for (; p < kc; ++p)
        for (std::size_t i = 0; i < B; ++i) out[p * nr + j + i] = c[j + i][p0 + p];
    }
    for (; j < w; ++j) {
      const float *src = c[j] + p0;
      for (std::size_t p = 0; p < kc; ++p) out[p * nr + j] = src[p];
    }
    if (w < nr)
      for (std::size_t p = 0; p < kc; ++p) std::fill(out + p * nr + w, out + (p + 1) * nr, 0.0f);
  }
}

__attribute__((target("avx2"))) void packColumnRunsAvx2(const float *const *col, std::size_t p0, std::size_t kc,
                                                        std::size_t j0, std::size_t nc, std::size_t nr, float *out) {
  packColumnRunsBody<true>(col, p0, kc, j0, nc, nr, out);
}

std::mutex poolMutex;
std::vector<std::unique_ptr<std::array<CacheLineFloats, ScratchLease::kBuffers>>> freeSets;

} // namespace

ScratchLease::ScratchLease() {
  std::lock_guard<std::mutex> lock(poolMutex);
  if (freeSets.empty()) freeSets.push_back(std::make_unique<std::array<CacheLineFloats, kBuffers>>());
  set_ = freeSets.back().release();
  freeSets.pop_back();
}

ScratchLease::~ScratchLease() {
  std::size_t bytes = 0;
  for (auto &b : *set_) bytes += b.capacity() * sizeof(float);
  if (bytes > (std::size_t(64) << 20))
    for (auto &b : *set_) CacheLineFloats().swap(b);
  std::lock_guard<std::mutex> lock(poolMutex);
  freeSets.emplace_back(set_);
}

float *ScratchLease::get(int i, std::size_t n) {
  auto &b = (*set_)[static_cast<std::size_t>(i)];
  if (b.size() < n) b.resize(n);
  return b.data(); // on a cache line (CacheLineAllocator): the kernels' vector loads of packed panels
                   // stay within one line each
}

// a float is finite when its magnitude's bits are below an infinity's: one unsigned maximum
// over the whole buffer, eight lanes at a time, with a version for each vector width
__attribute__((target_clones("avx512f", "avx2", "default"))) bool allFiniteF32(const float *v, std::size_t n) {
  typedef std::uint32_t U8 __attribute__((vector_size(32)));
  const U8 magnitude = U8{} + 0x7fffffffu;
  U8 most{};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    U8 bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bits &= magnitude;
    most = bits > most ? bits : most;
  }
  std::uint32_t top = 0;
  for (int l = 0; l < 8; ++l) top = most[l] > top ? most[l] : top;
  for (; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bits &= 0x7fffffffu;
    top = bits > top ? bits : top;
  }
  return top < 0x7f800000u;
}

void packColumnRuns(const float *const *col, std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc,
                    std::size_t nr, float *out) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return packColumnRunsAvx2(col, p0, kc, j0, nc, nr, out);
#endif
  packColumnRunsBody<false>(col, p0, kc, j0, nc, nr, out);
}

std::vector<std::string> gemmKernels() {
  std::vector<std::string> names;
  for (const auto &k : availableKernels()) names.push_back(k.name);
  return names;
}

bool useGemmKernel(const std::string &name) {
  for (const auto &k : availableKernels())
    if (name == k.name) {
      currentKernel().store(&k);
      return true;
    }
  return false;
}

thread_local unsigned gemmThreads = 1;

GemmThreads::GemmThreads(unsigned threads) : previous_(gemmThreads) { gemmThreads = std::max(1u, threads); }
GemmThreads::~GemmThreads() { gemmThreads = previous_; }

namespace {
/// Below this many products a product stays on one thread (starting one costs more).
constexpr std::size_t kProductsPerThread = std::size_t(1) << 22;
/// Up to this many rows of A, a row-major B is read in place rather than packed: the AVX-512
/// kernel's panels take three cache lines of each row of B, the others' one or less (a line a
/// page apart each product), so packing pays for them from a few rows on.
std::size_t rowsInPlace(const Kernel &K) { return K.NR == kAvx512NR ? 128 : 16; }

/// Where the kernel finds B: a packer writing panels, or rows read where they lie (row p at
/// base + rows[p]).
struct BSource {
  const PackB *pack = nullptr;
  const float *base = nullptr;
  const std::size_t *rows = nullptr;
  /// The same B from column j0 on.
  BSource from(std::size_t j0, PackB &shifted) const {
    if (!pack) return {nullptr, base + j0, rows};
    shifted = [this, j0](std::size_t p0, std::size_t kc, std::size_t js, std::size_t nc, std::size_t nr, float *out) {
      (*pack)(p0, kc, j0 + js, nc, nr, out);
    };
    return {&shifted, nullptr, nullptr};
  }
};

/// The product on one thread with kernel K: columns [0, n) of C.
void gemmColumns(const Kernel &K, std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda, const BSource &B,
                 float *C, std::size_t ldc, bool onto);

/// The product with whole panels of columns split over the step's threads; every output is
/// still summed by one thread, in order.
void gemmSplit(const Kernel &K, std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda,
               const BSource &B, float *C, std::size_t ldc, bool onto = false) {
  const std::size_t NR = static_cast<std::size_t>(K.NR);
  const std::size_t threads =
      std::min<std::size_t>({gemmThreads, (n + NR - 1) / NR, std::max<std::size_t>(1, m * n * k / kProductsPerThread)});
  if (threads <= 1) return gemmColumns(K, m, n, k, A, lda, B, C, ldc, onto);
  const std::size_t panels = (n + NR - 1) / NR;
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(threads);
  auto part = [&](std::size_t t) {
    const std::size_t j0 = panels * t / threads * NR, j1 = std::min(n, panels * (t + 1) / threads * NR);
    PackB shifted;
    try {
      gemmColumns(K, m, j1 - j0, k, A, lda, B.from(j0, shifted), C + j0, ldc, onto);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(part, t);
  part(0);
  for (auto &t : pool) t.join();
  for (auto &e : errors)
    if (e) std::rethrow_exception(e);
}

void gemmColumns(const Kernel &K, std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda,
                 const BSource &B, float *C, std::size_t ldc, bool onto) {
  if (m == 0 || n == 0 || (k == 0 && onto)) return;
  if (k == 0) {
    for (std::size_t i = 0; i < m; ++i) std::fill(C + i * ldc, C + i * ldc + n, 0.0f);
    return;
  }
  const int MR = K.MR, NR = K.NR;
  const auto [KC, MC, NCMax] = B.pack ? kPacked : kInPlace;
  const std::size_t NC = NCMax / NR * NR;
  const std::size_t ncMax = std::min(NC, (n + NR - 1) / NR * NR), kcMax = std::min(KC, k);
  ScratchLease scratch;
  float *bufB = B.pack ? scratch.get(0, kcMax * ncMax) : nullptr;
  for (std::size_t jc = 0; jc < n; jc += NC) {
    const std::size_t nc = std::min(NC, n - jc);
    for (std::size_t pc = 0; pc < k; pc += KC) {
      const std::size_t kc = std::min(KC, k - pc);
      if (B.pack) (*B.pack)(pc, kc, jc, nc, static_cast<std::size_t>(NR), bufB);
      for (std::size_t ic = 0; ic < m; ic += MC) {
        const std::size_t mc = std::min(MC, m - ic);
        const auto rowsAt = [&](std::size_t ir) { return static_cast<int>(std::min<std::size_t>(MR, mc - ir)); };
        const auto colsAt = [&](std::size_t jr) { return static_cast<int>(std::min<std::size_t>(NR, nc - jr)); };
        // C's block (ir, jr), asking for block (nir, njr), the next one (none past the end)
        const auto block = [&](std::size_t ir, std::size_t jr, std::size_t nir, std::size_t njr) {
          const NextBlock next = nir < mc && njr < nc ? NextBlock{C + (ic + nir) * ldc + jc + njr, rowsAt(nir), colsAt(njr)} : NextBlock{};
          K.micro(kc, A + (ic + ir) * lda + pc, lda, B.pack ? bufB + jr * kc : B.base + jc + jr,
                  B.pack ? nullptr : B.rows + pc, C + (ic + ir) * ldc + jc + jr, ldc, pc == 0 && !onto, rowsAt(ir),
                  colsAt(jr), next);
        };
        if (B.pack) {
          for (std::size_t ir = 0; ir < mc; ir += MR)
            for (std::size_t jr = 0; jr < nc; jr += NR)
              jr + NR < nc ? block(ir, jr, ir, jr + NR) : block(ir, jr, ir + MR, 0);
        } else {
          for (std::size_t jr = 0; jr < nc; jr += NR)
            for (std::size_t ir = 0; ir < mc; ir += MR)
              ir + MR < mc ? block(ir, jr, ir + MR, jr) : block(ir, jr, 0, jr + NR);
        }
      }
    }
  }
}

} // namespace

void gemmF32(std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda, const PackB &packB,
             float *C, std::size_t ldc) {
  gemmSplit(kernelFor(m, n), m, n, k, A, lda, BSource{&packB, nullptr, nullptr}, C, ldc);
}

void gemmF32Rows(std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda, const float *B,
                 const std::size_t *rows, float *C, std::size_t ldc, bool onto) {
  gemmSplit(kernelFor(m, n), m, n, k, A, lda, BSource{nullptr, B, rows}, C, ldc, onto);
}

void gemmF32(std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda, const float *B,
             std::size_t ldb, float *C, std::size_t ldc) {
  // few rows of A use each panel of B only a few times: its whole panels are read where they lie
  // (no overrun past a row), the last columns by a narrower kernel where there is one, and only
  // what remains is packed
  const Kernel &K = kernelFor(m, n);
  const std::size_t NR = static_cast<std::size_t>(K.NR);
  const std::size_t whole = n / NR * NR;
  if (m <= rowsInPlace(K) && whole > 0 && k > 0) {
    std::vector<std::size_t> rows(k);
    for (std::size_t p = 0; p < k; ++p) rows[p] = p * ldb;
    gemmSplit(K, m, whole, k, A, lda, BSource{nullptr, B, rows.data()}, C, ldc);
    B += whole, C += whole, n -= whole;
    if (const Kernel *narrow = narrowAvx512(K, n / 16 * 16)) {
      gemmSplit(*narrow, m, n / 16 * 16, k, A, lda, BSource{nullptr, B, rows.data()}, C, ldc);
      B += n / 16 * 16, C += n / 16 * 16, n %= 16;
    }
    if (n == 0) return;
  }
  gemmF32(m, n, k, A, lda,
          [=](std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc, std::size_t nr, float *out) {
            packRowMajorB(B, ldb, p0, kc, j0, nc, nr, out);
          },
          C, ldc);
}

} // namespace poplar_host
