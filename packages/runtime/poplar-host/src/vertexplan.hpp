// How the engine feeds the vertices of a compute set. When the graph is compiled, each vertex
// gets a plan: per edge, the regions of each connected tensor, where they sit in the vertex's
// private buffer, and which of them the vertex reads or writes where they lie instead. When the
// engine is made, each replica gets a VertexInstance per vertex: the vertex object bound to its
// buffer and to the variables, and the moves between the two.
//
// A compute set is a BSP superstep: every vertex reads the values from before it. Vertices
// write only their buffers (scattered after the whole compute set has run) or parts no other
// field of the compute set touches, so no vertex can see another's results.
#ifndef poplar_host_vertexplan_hpp
#define poplar_host_vertexplan_hpp

#include "internal.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace poplar_host {

/// How one edge of one vertex is fed: the regions of each connected tensor
/// (one per list element) and where they sit in the vertex's buffer.
struct EdgePlan {
  const FieldDesc *desc = nullptr;
  std::size_t elemSize = 0;
  std::vector<std::vector<Region>> parts;
  std::vector<std::size_t> partOffset; ///< bytes into the vertex buffer
  std::vector<std::size_t> partElems;
  /// Per part: bound to the variable's bytes rather than to the buffer (see planInPlace).
  std::vector<bool> inPlace;
  bool write = false;
};

struct VertexPlan {
  unsigned id = 0;
  unsigned tile = 0; ///< absolute
  const VertexDesc *desc = nullptr;
  std::string label;
  std::vector<EdgePlan> edges;
  std::vector<std::pair<const FieldDesc *, std::vector<ScalarValue>>> states;
  std::size_t fieldBytes = 0;  ///< of all its fields
  std::size_t bufferBytes = 0; ///< of the parts not bound in place
};

struct ComputeSetPlan {
  std::string name;
  std::vector<VertexPlan> vertices;
  std::vector<unsigned> tiles; ///< of its vertices, each once
  std::size_t fieldBytes = 0; ///< of all its vertices' fields
};

/// The plan of vertex `id`: its fields checked (connected, state set) and laid out in its buffer.
VertexPlan planVertex(const GraphState &s, unsigned id);

/// Vertex state bytes on its tile: a word for the vertex, a pointer per scalar
/// edge, pointer and size per vector, a pointer plus pointer-and-size per list
/// element, and the values of plain members.
std::uint64_t vertexStateBytes(const VertexPlan &p);

/// Decides which field parts of a compute set's vertices are bound where they lie: a part that
/// is one run of one variable when it is read-only, and, when written, also only if it is not a
/// constant and no other part of the compute set (of any vertex, its own included) overlaps it.
/// The other parts are laid out in the vertices' buffers.
void planInPlace(ComputeSetPlan &plan, const std::vector<VarInfo> &vars);

/// One vertex object of one replica, bound to its private buffer and to the variables.
struct VertexInstance {
  const VertexPlan *plan = nullptr;
  void *obj = nullptr;
  std::vector<std::uint8_t> buffer;
  /// `count` runs of `bytes` between a variable and the buffer: in the buffer one after another,
  /// in the variable `stride` bytes apart (0 for a broadcast element, `bytes` when contiguous);
  /// all that `repeats` times, `repeatStride` bytes further on in the variable each time (0 for
  /// a broadcast over an outer dim) and right after the previous time in the buffer. A move of
  /// an interleaved view's part (bufStride > bytes, repeats 1) puts its runs bufStride bytes
  /// apart in the buffer, between those of the other moves of the part.
  struct Move {
    std::uint8_t *var;
    std::uint8_t *buf;
    std::size_t bytes, count;
    std::ptrdiff_t stride;
    std::size_t repeats;
    std::ptrdiff_t repeatStride;
    std::size_t bufStride = 0; // 0: the runs lie one after another in the buffer
  };
  /// The gathers (every field part not bound in place) and the scatters (written parts not bound
  /// in place) of this vertex, resolved to addresses once: the variables' storage never moves.
  std::vector<Move> gathers, scatters;
  std::vector<std::shared_ptr<void>> keep;
  VertexInstance() = default;
  VertexInstance(const VertexInstance &) = delete;
  ~VertexInstance() {
    keep.clear();
    if (obj) plan->desc->destroy(obj);
  }
};

/// The vertex of `plan` for one replica, whose variable `v` starts at `varData(v)`.
std::unique_ptr<VertexInstance> makeVertexInstance(const VertexPlan &plan,
                                                   const std::function<std::uint8_t *(unsigned)> &varData);

/// Copies the runs of a move into the buffer.
void gatherMove(const VertexInstance::Move &m);
/// Copies the runs of a move back into the variable (of runs landing on one place, the last).
void scatterMove(const VertexInstance::Move &m);

} // namespace poplar_host

#endif
