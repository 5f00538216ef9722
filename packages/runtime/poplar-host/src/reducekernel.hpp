// Float reductions for popops::reduce's float-accumulating steps.
#ifndef POPLAR_HOST_REDUCEKERNEL_HPP
#define POPLAR_HOST_REDUCEKERNEL_HPP

#include <cstddef>
#include <vector>

namespace poplar_host {

/// Where the inputs of a row-major reduction lie: the p-th input (row-major order of the reduced
/// dims, which is the input's order) of output o (row-major order of the kept dims) is input
/// element base[o] + offset[p]; `runs` lists the offsets as runs of consecutive elements
/// (start, length), made once with the layout.
struct ReduceLayout {
  std::vector<std::size_t> base, offset;
  std::vector<std::pair<std::size_t, std::size_t>> runs;
};

/// The layout of reducing the dims of `shape` marked in `reduced`.
ReduceLayout reduceLayout(const std::vector<std::size_t> &shape, const std::vector<bool> &reduced);

enum class ReduceStep { Add, SquareAdd, Mul, Max, Min };

/// acc[o] = the float sum (a + v), sum of squares (a + v * v, the product rounded first),
/// product (a * v), maximum or minimum of output o's inputs in their order, starting from 0 (1
/// for products, -inf for the maximum, +inf for the minimum), each step rounded to float: bit for
/// bit the plain loop. A NaN input makes a maximum or minimum NaN.
void reduceFloats(ReduceStep step, const float *x, const ReduceLayout &layout, float *acc);

} // namespace poplar_host

#endif
