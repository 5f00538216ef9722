// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef popops_DynamicSlice_hpp
#define popops_DynamicSlice_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>

#include <cstddef>
#include <ostream>
#include <vector>

namespace popops {

/// A plan for slicing or updating; the emulation needs none, so every plan
/// is the same.
class SlicePlan {
public:
  SlicePlan() = default;
  friend std::ostream &operator<<(std::ostream &o, const SlicePlan &) { return o << "SlicePlan{}"; }
  friend bool operator<(const SlicePlan &, const SlicePlan &) noexcept { return false; }
  friend bool operator==(const SlicePlan &, const SlicePlan &) noexcept { return true; }
  friend bool operator!=(const SlicePlan &, const SlicePlan &) noexcept { return false; }
};

poplar::Tensor createSliceableTensor(poplar::Graph &graph, const poplar::Type &type,
                                     const std::vector<std::size_t> &shape, const std::vector<std::size_t> &dims,
                                     const std::vector<std::size_t> &sizes, std::size_t minGrainSize = 0,
                                     const poplar::DebugContext &debugContext = {});
poplar::Tensor createSliceableTensor(poplar::Graph &graph, const poplar::Type &type,
                                     const std::vector<std::size_t> &shape, const std::vector<std::size_t> &dims,
                                     const std::vector<std::size_t> &sizes, const SlicePlan &plan,
                                     const poplar::OptionFlags &options,
                                     const poplar::DebugContext &debugContext = {});
/// A tensor [numIndices, shape with dims replaced by sizes] to slice into.
poplar::Tensor createSliceTensor(poplar::Graph &graph, const poplar::Tensor &t, const std::vector<std::size_t> &dims,
                                 const std::vector<std::size_t> &sizes, std::size_t numIndices,
                                 const poplar::DebugContext &debugContext = {});
poplar::Tensor createSliceTensor(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                 std::size_t numIndices, const SlicePlan &plan, const poplar::OptionFlags &options,
                                 const poplar::DebugContext &debugContext = {});
/// An UNSIGNED_INT tensor [numIndices, dims.size()] for multiSlice/multiUpdate offsets.
poplar::Tensor createIndicesTensor(poplar::Graph &graph, const std::vector<std::size_t> &dims, std::size_t numIndices,
                                   const SlicePlan &plan, const poplar::OptionFlags &options,
                                   const poplar::DebugContext &debugContext = {});

/// t sliced at run-time offsets: offset is a 1-D integer tensor with one
/// offset per entry of dims; the result has t's shape with dims[i] of size
/// sizes[i]. As in popops, an offset at or past the end of its dimension
/// selects 0, and a slice running past the end wraps around to the start;
/// clamp offsets beforehand for other behaviour.
poplar::Tensor dynamicSlice(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &offset,
                            const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                            poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {});
void dynamicSliceWithOutput(poplar::Graph &graph, const poplar::Tensor &output, const poplar::Tensor &t,
                            const poplar::Tensor &offset, const std::vector<std::size_t> &dims,
                            const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog,
                            const poplar::DebugContext &debugContext = {});
/// Writes s into t at run-time offsets (same offset rules as dynamicSlice).
void dynamicUpdate(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                   const poplar::Tensor &offset, const std::vector<std::size_t> &dims,
                   const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext = {});

/// Several slices of t: offsets is [numOffsets, dims.size()] (or
/// [numOffsets] for one dim); the result is [numOffsets, t's shape with
/// dims[i] of size sizes[i]]. A slice that does not fit inside t is zero.
poplar::Tensor multiSlice(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &offsets,
                          const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                          poplar::program::Sequence &prog, const SlicePlan &plan, const poplar::OptionFlags &options,
                          const poplar::DebugContext &debugContext = {});
/// t[offsets[i]] = s[i]; slices that do not fit inside t are ignored.
void multiUpdate(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                 poplar::program::Sequence &prog, const SlicePlan &plan, const poplar::OptionFlags &options,
                 const poplar::DebugContext &debugContext = {});
/// t[offsets[i]] += scale * s[i] (in offset order); slices that do not fit are ignored.
void multiUpdateAdd(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                    const poplar::Tensor &offsets, const poplar::Tensor &scale, const std::vector<std::size_t> &dims,
                    const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &plan,
                    const poplar::OptionFlags &options, const poplar::DebugContext &debugContext = {});
/// t[offsets[i]] = max(t[offsets[i]], s[i]); slices that do not fit are ignored.
void multiUpdateMax(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                    const poplar::Tensor &offsets, const std::vector<std::size_t> &dims,
                    const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &plan,
                    const poplar::OptionFlags &options, const poplar::DebugContext &debugContext = {});

namespace embedding {
SlicePlan plan(const poplar::Graph &graph, const poplar::Type &dataType, const std::size_t numEntries,
               const std::size_t outputSize, const std::vector<std::size_t> &numLookups,
               const poplar::OptionFlags &options);
} // namespace embedding

} // namespace popops

#endif
