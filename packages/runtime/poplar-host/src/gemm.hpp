// Float matrix product for poplin's float-partials matmul and convolution.
#ifndef POPLAR_HOST_GEMM_HPP
#define POPLAR_HOST_GEMM_HPP

#include "cacheline.hpp"

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace poplar_host {

/// C[i][j] = sum over p of A[i][p] * B[p][j] for an m x k A (row stride lda), a k x n B (row
/// stride ldb) and an m x n C (row stride ldc), all row-major floats. Every element is summed
/// as the README's numerics describe: starting from +0, adding the products in order
/// p = 0, 1, ..., k - 1, each with one fused multiply-add (s = fma(a, b, s)), so the result is
/// bit for bit that of the plain loop. Cache-blocked, with a register-tiled inner kernel that
/// uses AVX-512, or AVX2 with FMA, when the CPU has them.
void gemmF32(std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda, const float *B,
             std::size_t ldb, float *C, std::size_t ldc);

/// Writes rows [p0, p0 + kc) and columns [j0, j0 + nc) of a k x n matrix B, as panels of nr
/// columns: panel after panel, each kc rows of nr floats, the last panel's missing columns zero.
/// A product whose B is computed (a convolution's unfolded inputs) writes it straight into the
/// panels instead of into a matrix first.
using PackB = std::function<void(std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc, std::size_t nr, float *out)>;

/// The packer of a B whose column j is the run col[j][0..k) (a transposed matrix, attention's
/// keys): eight columns by eight rows at a time through a transpose where the CPU has AVX2.
void packColumnRuns(const float *const *col, std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc,
                    std::size_t nr, float *out);
/// gemmF32 with B given by its packer (same sums, same order).
void gemmF32(std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda, const PackB &packB,
             float *C, std::size_t ldc);

/// gemmF32 with row p of B the n floats at B + rows[p], read where they lie (a convolution's
/// unfolded inputs that are runs of its padded input). The kernel reads whole panels, so up to
/// kGemmRowOverrun floats past the end of a row must be readable (their products are discarded).
/// With `onto`, each element of C is a sum so far that this call continues (its products follow
/// those already added: the same bits as one product over both ranges of k).
void gemmF32Rows(std::size_t m, std::size_t n, std::size_t k, const float *A, std::size_t lda, const float *B,
                 const std::size_t *rows, float *C, std::size_t ldc, bool onto = false);
constexpr std::size_t kGemmRowOverrun = 64;

/// The threads the products of the calling step may use (each output is still summed by one
/// thread, in order, so the bits do not depend on it): set for the duration of a step.
class GemmThreads {
public:
  explicit GemmThreads(unsigned threads);
  ~GemmThreads();
  GemmThreads(const GemmThreads &) = delete;
  GemmThreads &operator=(const GemmThreads &) = delete;

private:
  unsigned previous_;
};

/// The inner kernels this CPU can run, fastest first ("avx512", "avx2", "base"); the first is used.
std::vector<std::string> gemmKernels();
/// Uses the kernel named `name` from now on, if this CPU runs it (tests compare each kernel with
/// the plain loop); false otherwise.
bool useGemmKernel(const std::string &name);

/// No NaN or infinity among v[0..n): the check the float kernels make on every operand of
/// every product, so it runs in vector registers.
bool allFiniteF32(const float *v, std::size_t n);

/// Float buffers kept between runs for the kernels and their steps: growing a fresh vector of
/// megabytes every step costs more in page faults than the product itself. A lease takes a free
/// set from a process-wide pool (one per step running at the same moment) and gives it back;
/// sets holding more than 64 MiB are emptied on return (larger steps allocate afresh each time,
/// which their arithmetic outweighs).
class ScratchLease {
public:
  ScratchLease();
  ~ScratchLease();
  ScratchLease(const ScratchLease &) = delete;
  ScratchLease &operator=(const ScratchLease &) = delete;
  static constexpr int kBuffers = 8;
  /// Buffer i (0 <= i < kBuffers) resized to n floats; its contents are unspecified.
  float *get(int i, std::size_t n);

private:
  std::array<CacheLineFloats, kBuffers> *set_;
};

} // namespace poplar_host

#endif
