// The float matrix product's inner kernels (src/gemm.cpp), each one this CPU runs, bit for bit
// against the plain loop of the documented numerics, at sizes around their register and cache
// blocks, with row strides wider than the rows, through a packer as convolutions call it, split
// over threads, with B's rows read in place over two calls, the second continuing the sums, and
// with B's columns as runs; and the vectorised finiteness check, with a NaN or an infinity at
// every position of short buffers and at the end of a long one.
#include "../src/gemm.hpp"

#include "check.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

// the reference sums add each product with std::fma (one rounding), as the kernels do; nothing
// else here may be contracted
#pragma GCC optimize("fp-contract=off")

namespace {

std::mt19937 rng(7);

std::vector<float> randomFloats(std::size_t n) {
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto &x : v) x = d(rng);
  return v;
}

/// C = A x B, each output from +0 adding its products in order, each with one fused multiply-add.
std::vector<float> plain(std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda, const float *B,
                         std::size_t ldb) {
  std::vector<float> C(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (std::size_t p = 0; p < k; ++p) {
        s = std::fma(A[i * lda + p], B[p * ldb + j], s);
      }
      C[i * n + j] = s;
    }
  return C;
}

bool sameBits(const std::vector<float> &a, const float *b, std::size_t rows, std::size_t cols, std::size_t ld) {
  for (std::size_t i = 0; i < rows; ++i)
    if (std::memcmp(&a[i * cols], b + i * ld, cols * sizeof(float)) != 0) return false;
  return true;
}

} // namespace

int main() {
  using namespace poplar_host;
  const auto kernels = gemmKernels();
  CHECK(!kernels.empty() && kernels.back() == "base");
  CHECK(!useGemmKernel("no such kernel"));
  // m x n x k: one element, edges of every kernel's block (4/6/8 rows, 8/16/24/48 columns), the
  // 256-product and 192-row blocks, an odd large one, and last columns of B read in place by the
  // narrower kernels (48 + 32, 96 + 16 + 5)
  const std::size_t sizes[][3] = {{1, 1, 1},    {1, 1, 300},  {8, 48, 256}, {9, 49, 257}, {7, 47, 255},
                                  {6, 16, 3},   {5, 15, 513}, {193, 97, 40}, {64, 10, 784}, {3, 2100, 2},
                                  {200, 130, 600}, {64, 500, 784}, {64, 80, 300}, {17, 117, 65},
                                  {16, 1088, 144}, {33, 73, 290}, {4, 24, 7}};
  for (const auto &name : kernels) {
    CHECK(useGemmKernel(name));
    for (const auto &s : sizes) {
      const std::size_t m = s[0], n = s[1], k = s[2];
      // operands inside wider rows: the strides are honoured
      const std::size_t lda = k + 3, ldb = n + 5, ldc = n + 2;
      const auto A = randomFloats(m * lda), B = randomFloats(k * ldb);
      const auto want = plain(m, n, k, A.data(), lda, B.data(), ldb);
      std::vector<float> C(m * ldc, 123.0f);
      gemmF32(m, n, k, A.data(), lda, B.data(), ldb, C.data(), ldc);
      const std::string at = "kernel " + name + " at " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
      check::report(sameBits(want, C.data(), m, n, ldc), at + ": the plain loop's bits", __FILE__, __LINE__);
      CHECK_EQ(C[ldc - 1], 123.0f); // the padding between rows is not written
      // the same product with B given by a packer (as convolutions give their unfolded inputs)
      std::vector<float> D(m * n);
      const PackB pack = [&](std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc, std::size_t nr, float *out) {
        for (std::size_t j = j0; j < j0 + nc; j += nr)
          for (std::size_t p = p0; p < p0 + kc; ++p)
            for (std::size_t l = 0; l < nr; ++l) *out++ = j + l < j0 + nc ? B[p * ldb + j + l] : 0.0f;
      };
      gemmF32(m, n, k, A.data(), lda, pack, D.data(), n);
      check::report(sameBits(want, D.data(), m, n, n), at + " through a packer: the plain loop's bits", __FILE__, __LINE__);
      // columns split over threads (the large sizes): the same bits
      std::vector<float> E(m * ldc, 123.0f);
      {
        const GemmThreads threads(3);
        gemmF32(m, n, k, A.data(), lda, B.data(), ldb, E.data(), ldc);
      }
      check::report(sameBits(want, E.data(), m, n, ldc), at + " on 3 threads: the plain loop's bits", __FILE__, __LINE__);
      // B's rows where they lie, the products in two calls, the second continuing the first's
      // sums (the kernel may read kGemmRowOverrun floats past a row)
      std::vector<float> Bp(B);
      Bp.resize(B.size() + kGemmRowOverrun);
      std::vector<std::size_t> rows(k);
      for (std::size_t p = 0; p < k; ++p) rows[p] = p * ldb;
      std::vector<float> F(m * ldc, 123.0f);
      const std::size_t split = k / 3;
      gemmF32Rows(m, n, split, A.data(), lda, Bp.data(), rows.data(), F.data(), ldc);
      gemmF32Rows(m, n, k - split, A.data() + split, lda, Bp.data(), rows.data() + split, F.data(), ldc, true);
      check::report(sameBits(want, F.data(), m, n, ldc), at + " in rows, over two calls: the plain loop's bits", __FILE__, __LINE__);
    }
  }
  useGemmKernel(kernels.front());

  // B given by its columns' runs (a transposed matrix), packed 8 x 8 through a transpose and
  // element by element at the edges: columns and rows that are and are not multiples of eight,
  // panels of every kernel's width
  for (const auto &name : kernels) {
    CHECK(useGemmKernel(name));
    const std::size_t shapes[][3] = {{5, 53, 21}, {9, 100, 64}, {128, 128, 64}, {3, 7, 5}};
    for (const auto &s : shapes) {
      const std::size_t m = s[0], n = s[1], k = s[2], ldt = k + 3;
      const auto A = randomFloats(m * k), Bt = randomFloats(n * ldt);
      std::vector<float> B(k * n);
      for (std::size_t p = 0; p < k; ++p)
        for (std::size_t j = 0; j < n; ++j) B[p * n + j] = Bt[j * ldt + p];
      std::vector<const float *> col(n);
      for (std::size_t j = 0; j < n; ++j) col[j] = Bt.data() + j * ldt;
      const auto want = plain(m, n, k, A.data(), k, B.data(), n);
      std::vector<float> D(m * n);
      gemmF32(m, n, k, A.data(), k,
              [&](std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc, std::size_t nr, float *out) {
                packColumnRuns(col.data(), p0, kc, j0, nc, nr, out);
              },
              D.data(), n);
      check::report(sameBits(want, D.data(), m, n, n),
                    "kernel " + name + " at " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                        " from column runs: the plain loop's bits",
                    __FILE__, __LINE__);
    }
  }
  useGemmKernel(kernels.front());

  // no products: zeros
  std::vector<float> Z(6, 5.0f);
  gemmF32(2, 3, 0, nullptr, 0, static_cast<const float *>(nullptr), 3, Z.data(), 3);
  CHECK(Z == std::vector<float>(6, 0.0f));

  // allFiniteF32: every position of buffers shorter than two vector widths, then a long one
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (std::size_t n = 0; n < 34; ++n) {
    std::vector<float> v(n, -std::numeric_limits<float>::max());
    CHECK(allFiniteF32(v.data(), n));
    for (std::size_t i = 0; i < n; ++i)
      for (float b : bad) {
        v[i] = b;
        CHECK(!allFiniteF32(v.data(), n));
        v[i] = 1.0f;
      }
  }
  std::vector<float> big(100003, 0.5f);
  CHECK(allFiniteF32(big.data(), big.size()));
  big.back() = bad[1];
  CHECK(!allFiniteF32(big.data(), big.size()));
  return check::finish("gemm");
}
