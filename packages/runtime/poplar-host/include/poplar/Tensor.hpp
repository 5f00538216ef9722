// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_Tensor_hpp
#define poplar_Tensor_hpp

#include <poplar/ArrayRef.hpp>
#include <poplar/Interval.hpp>
#include <poplar/Type.hpp>

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace poplar_host {
struct TensorImpl;
}

namespace poplar {

enum class UpsampleMethod { REPEAT };

/// A view of elements of one or more graph variables, with a shape. Every
/// view operation (slice, dimShuffle, broadcast, ...) returns a new view of
/// the same elements; nothing is copied.
class Tensor {
public:
  Tensor();
  ~Tensor();
  Tensor(const Tensor &);
  Tensor(Tensor &&) noexcept;
  Tensor &operator=(const Tensor &);
  Tensor &operator=(Tensor &&) noexcept;

  Type elementType() const;
  std::size_t numElements() const;
  std::vector<std::size_t> shape() const;
  unsigned rank() const;
  std::size_t dim(unsigned i) const;
  bool valid() const { return impl_ != nullptr; }

  /// Elements [begin, end) of dimension dim.
  Tensor slice(std::size_t begin, std::size_t end, unsigned dim) const;
  Tensor slice(std::size_t begin, std::size_t end) const { return slice(begin, end, 0); }
  Tensor slice(const Interval &region, unsigned dim = 0) const {
    return slice(region.begin(), region.end(), dim);
  }
  /// A slice in every dimension at once.
  Tensor slice(ArrayRef<std::size_t> begin, ArrayRef<std::size_t> end) const;
  std::vector<Tensor> slices(ArrayRef<Interval> intervals, unsigned dim = 0) const;
  std::vector<Tensor> slices(const std::vector<std::vector<Interval>> &intervals,
                             unsigned dim = 0) const;
  std::vector<Tensor> slices(const ArrayRef<unsigned> &indices, unsigned dim = 0) const;
  /// The sub-tensor at the given leading indices (rank drops by indices.size()).
  Tensor index(ArrayRef<std::size_t> indices) const;
  Tensor operator[](std::size_t i) const;

  Tensor flatten() const;
  /// Merges dimensions [dimBegin, dimEnd) into one.
  Tensor flatten(unsigned dimBegin, unsigned dimEnd) const;
  Tensor reshape(ArrayRef<std::size_t> shape) const;
  /// Replaces dimensions [beginIndex, endIndex) with newDims.
  Tensor reshapePartial(unsigned beginIndex, unsigned endIndex,
                        ArrayRef<std::size_t> newDims) const;
  /// Result dimension i is dimension permutation[i] of this tensor.
  Tensor dimShuffle(ArrayRef<unsigned> permutation) const;
  /// Moves dimensions source[i] to destination[i], keeping the others in order.
  Tensor dimShufflePartial(ArrayRef<unsigned> source, ArrayRef<unsigned> destination) const;
  Tensor dimRoll(unsigned dimIdx, unsigned newIdx = 0) const;
  /// Inserts a singleton dimension before each given dimension of this tensor
  /// (indices are positions in this tensor, ascending; rank() means "at the end").
  Tensor expand(ArrayRef<std::size_t> indices) const;
  /// Removes the given singleton dimensions.
  Tensor squeeze(ArrayRef<std::size_t> indices) const;
  /// The transpose of a 2-D tensor.
  Tensor transpose() const;
  /// Every stride-th element of dimension dim, starting with the first.
  Tensor subSample(unsigned stride, unsigned dim) const;
  /// Repeats each element of dimension dim scale times.
  Tensor upsample(unsigned scale, unsigned dim, UpsampleMethod method) const;
  /// Repeats the whole tensor N times along dimension dim (size becomes N * dim(dim)).
  Tensor broadcast(unsigned N, unsigned dim) const;
  Tensor reverse(unsigned dim) const;
  /// The same elements seen as another type of the same size.
  Tensor reinterpret(const Type &type) const;

  bool isContiguous() const;
  bool containsAliases() const;
  bool containsConstant() const;
  bool isParallelWriteable() const;
  bool intersectsWith(const Tensor &other) const;
  std::vector<Interval> getContiguousRegions() const;
  std::string shapeToString() const;
  std::string getDebugStr() const;
  void dump() const;

  /// Emulation detail: the implementation object.
  explicit Tensor(std::shared_ptr<const poplar_host::TensorImpl> impl);
  const std::shared_ptr<const poplar_host::TensorImpl> &getImpl() const { return impl_; }

private:
  std::shared_ptr<const poplar_host::TensorImpl> impl_;
};

/// Joins tensors along dimension dim; all other dimensions must agree.
Tensor concat(ArrayRef<Tensor> ts, unsigned dim = 0);
Tensor concat(const Tensor &first, const Tensor &second, unsigned dim = 0);
/// Appends s, which has one dimension less than t, as a new slice at the end of dim.
Tensor append(const Tensor &t, const Tensor &s, unsigned dim);
inline Tensor append(const Tensor &t, const Tensor &s) { return append(t, s, 0); }

std::ostream &operator<<(std::ostream &os, const Tensor &t);

} // namespace poplar

#endif
