// tilegraph's host support library: what every generated host program needs besides its own graph
// (the device state, tensor helpers, attaching the device, and the stdin/stdout protocol the
// runtime speaks with the executable). Built once per toolchain (tilegraph_host.cpp) and linked
// into each program, with the Poplar SDK or with poplar-host alike.
// (an include guard, not #pragma once: the precompiled header holds a copy of this file)
#ifndef TILEGRAPH_HOST_HPP
#define TILEGRAPH_HOST_HPP

#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplin/ConvParams.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tilegraph {

// The device a program asks for: IPU hardware, the IPU Model, or an offline target (compile only).
constexpr unsigned kHardware = 0, kIpuModel = 1, kOffline = 2;
// Where a state handle lives between runs: its tensor (host handles), a remote buffer, or nowhere.
constexpr unsigned kOnChip = 0, kOffChip = 1, kTransient = 2;
// What an IO-tile buffer serves: an overlapped input or output stream, or an off-chip state
// handle whose remote-buffer loads or stores stage through the IO tiles.
constexpr unsigned kIoInput = 0, kIoOutput = 1, kIoRemote = 2;

// The module's device state, streams and per-IPU virtual graphs.
struct Device {
  poplar::Graph &graph;
  std::vector<poplar::Graph> ipu;
  std::vector<poplar::Tensor> state;
  std::vector<poplar::Tensor> inputs;
  std::vector<poplar::DataStream> inFifo;
  std::vector<poplar::DataStream> outFifo;
  poplar::Tensor seed;
  poplar::Tensor step;
  // remote buffers of off-chip state, by state index
  std::map<std::size_t, poplar::RemoteBuffer> remote;
  // bytes per replica of each state handle, and where it lives (kOnChip, kOffChip, kTransient):
  // filled by declareState from the program's table
  std::vector<std::size_t> stateBytes;
  std::vector<unsigned> stateStorage;
  // with IO tiles (Module::ioTiles): each IPU's IO-tile virtual graph (ipu[i] then spans only its
  // compute tiles), and the IO-tile buffers of overlapped input and output streams (by stream
  // index) and of remote-buffer transfers (by state index)
  std::vector<poplar::Graph> io;
  std::map<std::size_t, poplar::Tensor> ioInputs;
  std::map<std::size_t, poplar::Tensor> ioOutputs;
  std::map<std::size_t, poplar::Tensor> ioRemote;
};

// A CPU op's host function: its handle and the bytes of each input and output on one replica.
struct HostFunctionSpec {
  const char *handle;
  std::vector<std::size_t> inputBytes;
  std::vector<std::size_t> outputBytes;
};

// What a generated program tells the library about itself.
struct Module {
  unsigned replicas = 1;
  // IPUs the graph is placed on (one virtual graph each), and the device size requested
  unsigned ipus = 1;
  // tiles per IPU set aside for IO (TensorLocations.numIOTiles): the last ioTiles tiles of each IPU
  unsigned ioTiles = 0;
  unsigned deviceKind = kHardware;
  unsigned deviceIpus = 1;
  const char *ipuArch = "ipu2";
  // a device id (useIpuId), or -1 for the first free device
  int ipuId = -1;
  // Poplar's syncConfiguration device option ("" for the default)
  const char *syncConfiguration = "";
  // bytes per run (all replicas) of each input and output stream
  std::vector<std::size_t> inputBytes;
  std::vector<std::size_t> outputBytes;
  // the CPU ops' host functions, answered by the runtime (the "call" message)
  std::vector<HostFunctionSpec> hostFunctions;
  // the Precision options, set on every tile at the start of each run
  bool floatingPointExceptions = false;
  bool stochasticRounding = false;
  // adds the state, streams and random seed to the graph
  void (*declare)(Device &) = nullptr;
  // the program of one run
  poplar::program::Sequence (*buildProgram)(Device &) = nullptr;
};

// A tensor spread over the tiles of a (virtual) graph in runs of whole grains, from tile
// offset on (the generator staggers small tensors so that they do not pile up on tile 0).
poplar::Tensor newTensor(poplar::Graph &g, const poplar::Type &type, const std::vector<std::size_t> &shape,
                         unsigned grain, unsigned minElementsPerTile, unsigned offset, const std::string &name);

// poplin's parameters of a 2-D convolution: field, kernel, channels per group and groups, with
// the padding, kernel dilation and output stride transforms.
poplin::ConvParams convParams(const poplar::Type &type, std::size_t batch, std::vector<std::size_t> field,
                              std::vector<std::size_t> kernel, std::size_t inChansPerGroup,
                              std::size_t outChansPerGroup, std::size_t groups, std::vector<unsigned> padLower,
                              std::vector<unsigned> padUpper, std::vector<unsigned> dilation,
                              std::vector<unsigned> stride);

// x broadcast to shape (NumPy rules) as a view.
poplar::Tensor broadcastTo(poplar::Tensor x, const std::vector<std::size_t> &shape);

// The single element of a one-element tensor, for a scalar vertex field.
poplar::Tensor scalarOf(const poplar::Tensor &t);

// Calls f(tile, begin, end) for every contiguous region of t's tile mapping (t is flat).
template <typename F> void forEachRegion(poplar::Graph &g, const poplar::Tensor &t, F f) {
  const auto mapping = g.getTileMapping(t);
  for (unsigned tile = 0; tile < mapping.size(); ++tile) {
    for (const auto &region : mapping[tile]) f(tile, std::size_t(region.begin()), std::size_t(region.end()));
  }
}

// A rough cycle estimate for a generated vertex (IPU Model profiles need one): a fixed start-up
// cost plus perElement cycles per element, shared by the six workers of the tile.
void setCycles(poplar::Graph &g, poplar::VertexRef v, std::size_t elements, unsigned perElement);

// A field of the vertices addRegionVertices adds: connected to each region's slice of t, or to t
// whole (a scalar); an output made unmapped is mapped region by region to its vertex's tile.
// It refers to the caller's tensor rather than holding a copy: a list of these needs no
// destructors, which makes each call in a generated program far quicker to compile. A
// periodic field (periodSize > 0) is an input of periodSize elements of which output element g
// reads element (g / periodInner) % periodSize: each vertex is connected to the elements its
// region reads (all of them when the region wraps around), and its unsigned members `<name>From`,
// `<name>Inner` and `<name>Size` are set to the first of them and to the period's sizes (fields
// rather than constants of the vertex, so the device code does not depend on the shapes).
struct RegionField {
  const char *name;
  const poplar::Tensor &t;
  bool whole = false;
  bool mapHere = false;
  std::size_t periodInner = 0;
  std::size_t periodSize = 0;
};

// The element-wise pattern: one vertex of class `vertex` per contiguous region of flat tensor
// `over` on each tile, on that tile, with setCycles' estimate for cyclesPerElement; a field with a
// period (periodInner, periodSize) is connected to the part of its input the region reads, and
// its From, At (and with periodInner > 1, Along) members say where that is.
// (A function of the library rather than a loop in each program: generated programs compile faster.)
void addRegionVertices(poplar::Graph &g, const poplar::ComputeSet &cs, const char *vertex,
                       const poplar::Tensor &over, std::initializer_list<RegionField> fields, unsigned cyclesPerElement);

// A state or input tensor as a program's declare() lists it: spread linearly over the tiles of
// its IPU from tile `offset` on, in 8-byte grains and at least 128 bytes a tile (the generator's
// linearMappingParams), unless a PopLibs creation function made it.
struct TensorSpec {
  const char *name;
  poplar::Type type;
  std::vector<std::size_t> shape;
  unsigned ipu;
  unsigned offset;
  // where state lives between runs (kOnChip, kOffChip, kTransient); inputs: kOnChip
  unsigned storage;
};

// A row of a program's state or input table: a TensorSpec with its type and shape given as
// indices into the program's lists of distinct types and shapes. The table is constant data, so
// a program of thousands of tensors compiles it in no time (a list of TensorSpecs is code).
struct TensorRow {
  const char *name;
  unsigned type;
  unsigned shape;
  unsigned ipu;
  unsigned offset;
  unsigned storage;
};

// A program's tensor table: its rows, and the types and shapes they index.
struct TensorTable {
  const std::vector<TensorRow> &rows;
  const std::vector<poplar::Type> &types;
  const std::vector<std::vector<std::size_t>> &shapes;
};

// Adds the state tensors in table order (`made`: those laid out by PopLibs, by index), with the
// host handles "v<i>.w" / "v<i>.r" of on-chip state and the remote buffer "v<i>.remote" of
// off-chip state.
void declareState(Device &d, const TensorTable &table, const std::map<std::size_t, poplar::Tensor> &made);

// Adds the input tensors in table order, each with its host-to-device stream "in<i>".
void declareInputs(Device &d, const TensorTable &table, const std::map<std::size_t, poplar::Tensor> &made);

// An IO-tile buffer (kIoInput, kIoOutput or kIoRemote, for stream or state `index`): spread
// linearly over the IO tiles of its IPU from tile `tensor.offset` of them on.
struct IoBufferSpec {
  unsigned kind;
  std::size_t index;
  TensorSpec tensor;
};

// Adds the IO-tile buffers (d.ioInputs / d.ioOutputs / d.ioRemote) on the IPUs' IO-tile graphs.
void declareIoBuffers(Device &d, const std::vector<IoBufferSpec> &specs);

// A repeated layer lowered once (outlining): the function, its parameter tensors (the inputs of
// an occurrence are copied into them) and its result tensors.
struct OutlinedFunction {
  poplar::Function function;
  std::vector<poplar::Tensor> params;
  std::vector<poplar::Tensor> results;
};

// A tensor a call passes to an outlined layer: a reference to the caller's, so that the list of
// a call's tensors holds no copies and needs no destructors (each call compiles faster).
struct TensorRef {
  const poplar::Tensor &t;
  TensorRef(const poplar::Tensor &tensor) : t(tensor) {}
};

// The tensors an outlined layer built in the caller's program reads, as in[i]: a view of the
// call's list (`const TensorRefs in(args.begin());` at the top of the layer), valid during the call.
class TensorRefs {
public:
  explicit TensorRefs(const TensorRef *first) : refs_(first) {}
  const poplar::Tensor &operator[](std::size_t i) const { return refs_[i].t; }

private:
  const TensorRef *refs_;
};

// One occurrence of an outlined function: copies `args` into its parameter tensors, calls it and
// returns copies of its results laid out like them (the next occurrence overwrites its own).
std::vector<poplar::Tensor> callFunction(poplar::Graph &g, poplar::program::Sequence &prog, const OutlinedFunction &f,
                                         std::initializer_list<TensorRef> args, const char *name);

// The state an outlined call updated: copies results[k] into d.state[i] for each {k, i} of
// `writes`, in order (the program's state table names each index).
void writeStates(Device &d, poplar::program::Sequence &prog, const std::vector<poplar::Tensor> &results,
                 std::initializer_list<std::pair<std::size_t, std::size_t>> writes);

// Advances a ring buffer's counter (a scalar) modulo the ring's depth, on the counter's tile
// (pipeline stashes).
void advanceRing(poplar::Graph &g, const poplar::Tensor &counter, unsigned depth, const std::string &vertex,
                 poplar::program::Sequence &prog);

// The options a device is requested with: the sync configuration of Options.syncPattern.
poplar::OptionFlags deviceOptions(const Module &m);

// The whole program: attach the device, build the graph, load the engine, then serve the
// protocol on stdin/stdout until "quit". argv[1] names the codelets (codelets.gp by default).
// Returns the process exit status.
int hostMain(int argc, char **argv, const Module &m);

} // namespace tilegraph

// Instantiated once, in this library (tilegraph_host.cpp): every generated program uses these
// containers, and instantiating them in each program was about a quarter of its compile.
extern template class std::vector<poplar::Tensor>;
extern template class std::map<std::size_t, poplar::Tensor>;
extern template class std::vector<poplar::DataStream>;
extern template class std::vector<tilegraph::TensorRow>;
extern template class std::vector<tilegraph::HostFunctionSpec>;
extern template class std::vector<poplar::Type>;
// shapes: every tensor a program makes or reshapes has one (two thirds of the functions a
// program's compile emitted were these vectors' members)
extern template class std::vector<std::size_t>;
extern template class std::vector<std::vector<std::size_t>>;

#endif // TILEGRAPH_HOST_HPP
