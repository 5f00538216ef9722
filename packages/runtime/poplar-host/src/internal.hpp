// poplar-host internals: the data behind Tensor, Graph and Program handles,
// and helpers shared by the engine and the PopLibs emulation.
#ifndef poplar_host_internal_hpp
#define poplar_host_internal_hpp

#include <poplar/DataStream.hpp>
#include <poplar/Graph.hpp>
#include <poplar/HalfFloat.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/Target.hpp>
#include <poplar/Tensor.hpp>
#include <poplar/Type.hpp>
#include <poplar_host/Arithmetic.hpp>
#include <poplar_host/ScalarValue.hpp>
#include <poplar_host/VertexRegistry.hpp>

#include "cacheline.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace poplar_host {

struct GraphState;
struct ReplicaContext;

/// Elements [begin, end) of variable `var`.
struct Region {
  unsigned var;
  std::size_t begin, end;
  std::size_t size() const { return end - begin; }
};

/// A tensor view: its elements, in row-major order of `shape`, are the
/// concatenation of `regions`. Views of views are flattened to regions when
/// they are made, so the engine never walks a chain of views.
struct TensorImpl {
  GraphState *graph = nullptr;
  poplar::Type type;
  std::vector<std::size_t> shape;
  std::size_t numElements = 0;
  std::vector<Region> regions;
  std::vector<std::size_t> starts; ///< tensor element index where each region starts
};

/// Calls fn(var, begin, end) for the variable regions holding tensor
/// elements [a, b), in order.
template <class F> void forEachRegion(const TensorImpl &t, std::size_t a, std::size_t b, F &&fn) {
  if (a >= b) return;
  std::size_t i = 0, lo = 0, hi = t.starts.size();
  while (hi - lo > 1) { // last region starting at or before a
    const std::size_t mid = (lo + hi) / 2;
    if (t.starts[mid] <= a) lo = mid;
    else hi = mid;
  }
  for (i = lo; i < t.regions.size() && a < b; ++i) {
    const Region &r = t.regions[i];
    const std::size_t off = a - t.starts[i];
    const std::size_t take = std::min(b - a, r.size() - off);
    fn(r.var, r.begin + off, r.begin + off + take);
    a += take;
  }
}

/// Makes a tensor handle from its parts (fills numElements and starts).
poplar::Tensor makeTensor(GraphState *graph, poplar::Type type, std::vector<std::size_t> shape,
                          std::vector<Region> regions);

const TensorImpl &impl(const poplar::Tensor &t, const char *what = "tensor");

/// Appends [begin, end) of `var` to a region list, merging with the last
/// region when contiguous.
inline void appendRegion(std::vector<Region> &out, unsigned var, std::size_t begin, std::size_t end) {
  if (begin == end) return;
  if (!out.empty() && out.back().var == var && out.back().end == begin) out.back().end = end;
  else out.push_back({var, begin, end});
}

struct VarInfo {
  std::string name;
  poplar::Type type;
  std::size_t numElements = 0;
  bool isConstant = false;
  DeviceBytes constData;           ///< device bytes of a constant
  std::vector<std::int32_t> tile; ///< tile of each element (-1: unmapped); empty until mapped
  DeviceBytes initData;            ///< initial contents from Graph::setInitialValue (may be empty)
  /// Made by createMatMulInputLHS/RHS (MatMul) or createWeights/createInput (Conv): already in
  /// the layout that operation plans for, so it reads the whole variable without a rearranged copy.
  enum class PlannedLayout : std::uint8_t { None, MatMul, Conv };
  PlannedLayout plannedLayout = PlannedLayout::None;
};

struct FieldConnection {
  std::vector<poplar::Tensor> tensors; ///< one for scalar/vector edges, one per element for lists
  std::vector<bool> connected;
  bool sizeSet = false;
  std::vector<ScalarValue> values; ///< plain (state) members
  bool valueSet = false;
};

struct VertexInfo {
  std::string typeName;
  const VertexDesc *desc = nullptr;
  unsigned computeSet = 0;
  int tile = -1; ///< absolute tile
  std::map<std::string, FieldConnection> fields;
  std::uint64_t perfEstimate = 0;
};

struct ComputeSetInfo {
  std::string name;
  std::vector<unsigned> vertices;
};

struct StreamInfo {
  std::string handle;
  poplar::Type type;
  std::size_t numElements = 0;
  bool hostToDevice = true;
  poplar::ReplicatedStreamMode mode = poplar::ReplicatedStreamMode::REPLICATE;
};

struct HostFunctionInfo {
  std::string handle;
  std::vector<std::pair<poplar::Type, std::size_t>> inputs, outputs;
};

struct RemoteBufferInfo {
  std::string handle;
  poplar::Type type;
  std::size_t numElements = 0;
  std::size_t repeats = 1;
  bool rearrangeOnHost = false, optimiseMemory = false;
};

struct HostHandle {
  std::string handle;
  poplar::Tensor tensor;
  bool write = false;
};

/// Everything a top-level graph and its virtual graphs own.
struct GraphState {
  poplar::Target target; ///< per replica
  unsigned replicationFactor = 1;
  std::vector<VarInfo> vars;
  std::vector<VertexInfo> vertices;
  std::vector<ComputeSetInfo> computeSets;
  std::vector<StreamInfo> streams;
  std::map<std::string, unsigned> streamByName;
  std::map<std::string, HostHandle> hostHandles;
  std::vector<poplar::program::Program> functions;
  std::vector<HostFunctionInfo> hostFunctions;
  bool codeletsLoaded = false;
  std::vector<RemoteBufferInfo> remoteBuffers; ///< ids are RemoteBuffer::getId()
};

/// A node of a control program.
struct ProgramNode {
  enum class Kind {
    Sequence,
    Execute,
    CopyTensor,
    CopyFromStream,
    CopyToStream,
    Repeat,
    RepeatWhile,
    If,
    Switch,
    Print,
    Call,
    HostStep,
    Collective,
    Abort,
    Nop,
    CopyToRemote,   ///< src -> remote buffer `id` (rows chosen by remoteOffset)
    CopyFromRemote, ///< remote buffer `id` -> dst
    HostCall,       ///< host function `id`: touches[0, count) in, the rest out
  };
  Kind kind = Kind::Sequence;
  std::vector<std::shared_ptr<ProgramNode>> children;
  poplar::Tensor src, dst; ///< copies; src is the predicate/control of If, Switch, RepeatWhile
  unsigned id = 0;         ///< compute set, stream or function id
  unsigned count = 0;      ///< Repeat count
  bool flag = false;       ///< RepeatWhile: loop while the predicate is true
  std::string text;        ///< Print title, Abort message, HostStep name
  std::vector<std::int32_t> caseValues; ///< Switch: children[i] runs for caseValues[i]
  bool hasDefault = false;              ///< Switch: children.back() is the default
  /// HostStep: the work, run once per replica.
  std::function<void(ReplicaContext &)> hostStep;
  /// Collective: replica groups and the combine function (see gcl.cpp).
  std::vector<std::vector<unsigned>> groups;
  std::function<std::vector<double>(const std::vector<const std::vector<double> *> &group, unsigned rank)> combine;
  /// HostStep: the tensors the step reads or writes.
  std::vector<poplar::Tensor> touches;
  /// CopyToRemote/CopyFromRemote: the row offsets (also in `touches`); invalid means row 0.
  poplar::Tensor remoteOffset;
  /// HostStep of a matmul or convolution: its FLOPs (2 per multiply-add), for the profile's
  /// cycle estimate (see profile.hpp).
  std::uint64_t flops = 0;
};

std::shared_ptr<ProgramNode> makeNode(ProgramNode::Kind kind);

/// How a PopLibs step rounds its results: the floating-point mode of the tile
/// holding its output, this execution's stochastic-rounding stream and the
/// flags raised (see poplar_host/Arithmetic.hpp).
struct Rounder {
  FpMode mode;
  unsigned tile = 0; ///< absolute
  std::uint64_t key = 0;
  unsigned flags = 0;
  /// The uniform draw for rounding number k of element e (0.5 without esr).
  double draw(std::uint64_t e, std::uint64_t k) const {
    return mode.esr ? unitInterval(mix64(key ^ mix64(mix64(e) + k))) : 0.5;
  }
  /// x rounded to half (as a value).
  double toHalf(double x, std::uint64_t e, std::uint64_t k) {
    return static_cast<double>(halfBitsToFloat(roundToHalfBits(x, mode, draw(e, k), flags)));
  }
};

/// The draw index of the rounding to the output type (after any partial sums).
constexpr std::uint64_t kFinalRounding = ~std::uint64_t(0);

/// Names of raised flags ("overflow, invalid operation") for messages.
std::string fpFlagNames(unsigned flags);

/// Per-replica access to device memory while a program runs.
struct ReplicaContext {
  unsigned replica = 0;
  unsigned numReplicas = 1;
  /// Device bytes of a variable for this replica (constants are shared).
  std::function<std::uint8_t *(unsigned var)> varData;
  /// This replica's floating-point mode and stochastic-rounding seed of every tile.
  FpMode *fpModes = nullptr;
  std::uint64_t *hwSeeds = nullptr;
  std::size_t numTiles = 0;
  /// Distinguishes the running step from others rounding on the same tile.
  std::uint64_t stepKey = 0;
  /// Threads a step may use for its own work (a large product splits its columns over them):
  /// POPLAR_HOST_THREADS when one replica runs and IPUs do not run on threads, else 1.
  unsigned threads = 1;
  /// Flags raised so far that their tile traps on (the engine stops the program).
  mutable unsigned trapped = 0;
  mutable unsigned trappedTile = 0;
  /// The tile the step rounded results for (-1: none), whose generator then advances.
  mutable int roundedTile = -1;

  /// Absolute tile of a tensor's first element (0 for an empty or unmapped tensor).
  unsigned tileOf(const poplar::Tensor &t) const;
  /// The rounding of results written to `out`.
  Rounder rounder(const poplar::Tensor &out) const;
  /// Records what a rounder raised.
  void raised(const Rounder &r) const {
    const unsigned f = r.flags & r.mode.traps();
    if (f && !trapped) trappedTile = r.tile;
    trapped |= f;
  }

  /// The tensor's elements as doubles (exact for every supported type but
  /// 64-bit integers beyond 2^53).
  std::vector<double> read(const poplar::Tensor &t) const;
  /// Stores doubles into the tensor, rounding to its type: float and half as
  /// the tile of its first element rounds (IEEE to nearest even by default),
  /// integers by truncation with saturation.
  void write(const poplar::Tensor &t, const std::vector<double> &values) const;
  /// The elements as floats into dst (tensor order), straight from the device bytes for float
  /// and half (exact); other types through read().
  void readFloats(const poplar::Tensor &t, float *dst) const;
  /// Stores floats: a float tensor takes them as they are (no rounding can happen, so no flag
  /// either); other types round through write().
  void writeFloats(const poplar::Tensor &t, const float *v) const;
  /// A float tensor that is one contiguous region: its device bytes as floats, to read or write
  /// in place; otherwise nullptr (then readFloats / writeFloats go through a copy).
  float *contiguousFloats(const poplar::Tensor &t) const;
  /// A float tensor's elements as rows of `rowLength` floats, each lying in one region: the rows'
  /// addresses into `rows` (cleared first), in tensor order. False, with `rows` unspecified, when
  /// a row crosses a region (or the tensor is not float).
  bool floatRows(const poplar::Tensor &t, std::size_t rowLength, std::vector<const float *> &rows) const;
  /// The elements as floats: in place when contiguousFloats allows, else read into `scratch`.
  const float *floatsOf(const poplar::Tensor &t, float *scratch) const {
    if (const float *p = contiguousFloats(t)) return p;
    readFloats(t, scratch);
    return scratch;
  }
  /// Raw device bytes, in tensor order.
  std::vector<std::uint8_t> readBytes(const poplar::Tensor &t) const;
  void writeBytes(const poplar::Tensor &t, const std::uint8_t *bytes) const;
};

/// The remote buffers of one engine: every replica's rows, kept apart from
/// tile memory (see RemoteBuffer.cpp). Rows never written read as zero.
class RemoteMemory {
public:
  /// Engine::load: every buffer of the graph, zeroed, for each replica.
  void load(const GraphState &graph, unsigned replicas);
  /// Runs a CopyToRemote / CopyFromRemote node for one replica.
  void copy(const ProgramNode &n, const ReplicaContext &ctx);
  /// Engine::copyToRemoteBuffer / copyFromRemoteBuffer; returns the bytes moved.
  std::size_t hostCopy(const std::string &handle, std::uint8_t *buf, std::size_t bytes, std::uint64_t repeat,
                       unsigned replica, bool toRemote);
  /// Every replica's rows as bytes, and back: a distributed run starts from
  /// process 0's (see distributed.hpp).
  std::vector<std::uint8_t> pack() const;
  void unpack(const std::vector<std::uint8_t> &bytes);

private:
  std::vector<std::uint8_t> &storage(unsigned replica, unsigned buffer);
  const GraphState *graph_ = nullptr;
  std::vector<RemoteBufferInfo> buffers_;                    ///< as when loaded
  /// [replica][buffer], allocated on first use; IPU threads never share a buffer (see ipusets.hpp)
  std::vector<std::vector<std::vector<std::uint8_t>>> data_;
};

class EngineRuntime;
class EngineProfiler;
/// The remote memory of an engine (a hook into the runtime in EngineRuntime.cpp).
RemoteMemory &remoteMemory(EngineRuntime &rt);
/// The engine's profiler when it measures runs, else nullptr (see profile.hpp).
EngineProfiler *runProfiler(EngineRuntime &rt);
const GraphState &graphOf(EngineRuntime &rt);
/// Remote bytes one replica holds, and the profile summary's line for them.
std::uint64_t remoteBufferBytes(const GraphState &graph);
std::string remoteMemorySummary(const GraphState &graph, unsigned replicas);

/// Device element <-> double.
double loadElement(poplar::Type::Id type, const std::uint8_t *p);
void storeElement(poplar::Type::Id type, std::uint8_t *p, double v);
void storeScalarValue(poplar::Type::Id type, std::uint8_t *p, const ScalarValue &v);
/// An integer stored in an integer element keeping its low bits (two's complement wrap-around),
/// as C++ integer conversions and PopLibs' integer casts do; bool stores v != 0.
void storeWrappedInteger(poplar::Type::Id type, std::uint8_t *p, long long v);

/// Adds a step computed on the host (how the PopLibs functions run); `touches` lists every
/// tensor it reads or writes, for the liveness of its variables. Returns the step's node.
std::shared_ptr<ProgramNode> addHostStep(poplar::program::Sequence &prog, const std::string &name,
                                         std::function<void(ReplicaContext &)> fn,
                                         std::vector<poplar::Tensor> touches);

/// Graph helpers for the library code.
GraphState &state(const poplar::Graph &g);
/// poputil's linear mapping of n elements over numTiles tiles.
poplar::Graph::TileToTensorMapping linearMapping(std::size_t numTiles, std::size_t n, unsigned minElementsPerTile,
                                                 unsigned grainSize);
/// Maps a tensor linearly over the graph's tiles (poputil's rule), from tile `offset` on
/// (wrapping round).
void mapLinearly(poplar::Graph &graph, const poplar::Tensor &t, unsigned minElementsPerTile, unsigned grainSize,
                 unsigned offset = 0);
/// The start tile PopLibs results are mapped from: a hash of the shape (FNV-1a over each
/// dimension's four low bytes), so small results spread over the tiles.
std::size_t mappingOffsetOf(std::size_t numTiles, const std::vector<std::size_t> &shape);
/// A new variable mapped linearly with the default grain.
poplar::Tensor newMappedVariable(poplar::Graph &graph, const poplar::Type &type,
                                 const std::vector<std::size_t> &shape, const std::string &name);

std::string shapeString(const std::vector<std::size_t> &shape);
/// "vertex 3 ('Name' in compute set 'cs')" for messages.
std::string vertexLabel(const GraphState &s, unsigned vertexId);
std::size_t product(const std::vector<std::size_t> &shape);

/// Checks an availableMemoryProportion option, when set, as PopLibs does (a number in [0, 1]);
/// `op` names the operation in the poplar::invalid_option it throws otherwise.
void checkMemoryProportion(const poplar::OptionFlags &o, const char *op);

/// Formats a message from stream pieces: message("a", 1, "b").
template <class... A> std::string message(const A &...a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

} // namespace poplar_host

#endif
