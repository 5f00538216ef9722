// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef popops_Fill_hpp
#define popops_Fill_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar_host/ScalarValue.hpp>

#include <type_traits>

namespace popops {

namespace detail {
void fillValue(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog,
               const poplar_host::ScalarValue &value, const poplar::DebugContext &debugContext);
}

/// Sets every element of t to fillValue (converted to t's type).
template <typename FillValueType>
void fill(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog, FillValueType fillValue,
          const poplar::DebugContext &debugContext = {}) {
  // libpopops instantiates fill for these value types only: any other would not link with the SDK
  static_assert(std::is_same<FillValueType, float>::value || std::is_same<FillValueType, double>::value ||
                    std::is_same<FillValueType, int>::value || std::is_same<FillValueType, unsigned>::value ||
                    std::is_same<FillValueType, long long>::value || std::is_same<FillValueType, unsigned long long>::value,
                "popops::fill<T> exists in libpopops for float, double, int, unsigned, long long and unsigned long long only");
  detail::fillValue(graph, t, prog, poplar_host::ScalarValue::of(fillValue), debugContext);
}

} // namespace popops

#endif
