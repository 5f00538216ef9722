// Graph construction: variables, constants, tile mappings, vertices and their
// connections, host streams. Checks that need the whole graph (complete tile
// mappings, connected fields, memory per tile) run when an Engine is built.
#include "internal.hpp"

#include <poplar/Graph.hpp>
#include <poplar/exceptions.hpp>

#include <algorithm>
#include <cstring>

namespace poplar_host {

GraphState &state(const poplar::Graph &g) { return *g.getState(); }

poplar::Graph::TileToTensorMapping linearMapping(std::size_t numTiles, std::size_t n, unsigned minElementsPerTile,
                                                 unsigned grainSize) {
  // poputil's rule: split the elements into grains and give each tile, in
  // order, the same whole number of grains (at least minElementsPerTile).
  const std::size_t grain = std::max(1u, grainSize);
  const std::size_t grains = (n + grain - 1) / grain;
  std::size_t grainsPerTile = (grains + numTiles - 1) / numTiles;
  const std::size_t minGrains = (minElementsPerTile + grain - 1) / grain;
  grainsPerTile = std::max<std::size_t>({grainsPerTile, minGrains, 1});
  const std::size_t perTile = grainsPerTile * grain;
  poplar::Graph::TileToTensorMapping mapping(numTiles);
  for (std::size_t tile = 0, at = 0; at < n; ++tile, at += perTile) mapping[tile].emplace_back(at, std::min(n, at + perTile));
  return mapping;
}

void mapLinearly(poplar::Graph &graph, const poplar::Tensor &t, unsigned minElementsPerTile, unsigned grainSize,
                 unsigned offset) {
  const std::size_t tiles = graph.getTarget().getNumTiles();
  auto m = linearMapping(tiles, t.numElements(), minElementsPerTile, grainSize);
  if (offset % tiles != 0) std::rotate(m.begin(), m.end() - static_cast<std::ptrdiff_t>(offset % tiles), m.end());
  graph.setTileMapping(t, m);
}

std::size_t mappingOffsetOf(std::size_t numTiles, const std::vector<std::size_t> &shape) {
  std::uint32_t h = 0x811c9dc5u;
  for (std::size_t d : shape)
    for (unsigned k = 0; k < 4; ++k) {
      h ^= static_cast<std::uint32_t>((d >> (8 * k)) & 0xffu);
      h *= 0x01000193u;
    }
  return numTiles ? h % numTiles : 0;
}

poplar::Tensor newMappedVariable(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                 const std::string &name) {
  auto t = graph.addVariable(type, shape, name);
  const auto &target = graph.getTarget();
  mapLinearly(graph, t, (128 + target.getTypeSize(type) - 1) / target.getTypeSize(type), target.getVectorWidth(type),
              static_cast<unsigned>(mappingOffsetOf(target.getNumTiles(), shape)));
  return t;
}

std::string vertexLabel(const GraphState &s, unsigned id) {
  const auto &v = s.vertices[id];
  return message("vertex ", id, " ('", v.typeName, "' in compute set '", s.computeSets[v.computeSet].name, "')");
}

namespace {
std::string listNames(const std::vector<std::string> &names) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < 20; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 20) s += message(", ... (", names.size(), " in all)");
  return s.empty() ? "none" : s;
}
} // namespace

} // namespace poplar_host

namespace poplar {

using namespace poplar_host;

Graph::Graph(const Target &target, replication_factor r) : state_(std::make_shared<GraphState>()) {
  if (r.value == 0) throw graph_replication_error("replication factor must be at least 1");
  if (target.getNumIPUs() % r.value != 0)
    throw graph_replication_error(message("cannot replicate a target of ", target.getNumIPUs(), " IPUs ", r.value,
                                          " times"));
  // A replicated graph describes one replica: its target has numIPUs / r IPUs.
  target_ = r.value == 1 ? target : target.createVirtualTarget(target.getNumIPUs() / r.value, target.getTilesPerIPU());
  state_->target = target_;
  state_->replicationFactor = r.value;
}

Graph::Graph(const Device &device, replication_factor r) : Graph(device.getTarget(), r) {}
Graph::Graph(std::shared_ptr<GraphState> state, unsigned tileOffset, Target target)
    : state_(std::move(state)), tileOffset_(tileOffset), target_(std::move(target)) {}
Graph::~Graph() = default;
Graph::Graph(Graph &&) noexcept = default;
Graph &Graph::operator=(Graph &&) noexcept = default;

const Target &Graph::getTarget() const { return target_; }
unsigned Graph::getReplicationFactor() const { return state_->replicationFactor; }

Graph Graph::createVirtualGraph(unsigned lowerTile, unsigned upperTile) {
  if (lowerTile >= upperTile || upperTile > target_.getNumTiles())
    throw invalid_tile_mapping(message("createVirtualGraph: tiles [", lowerTile, ", ", upperTile,
                                       ") are not a range of this graph's ", target_.getNumTiles(), " tiles"));
  const unsigned n = upperTile - lowerTile, perIpu = target_.getTilesPerIPU();
  Target t = n % perIpu == 0 ? target_.createVirtualTarget(n / perIpu, perIpu) : target_.createVirtualTarget(1, n);
  return Graph(state_, tileOffset_ + lowerTile, t);
}

Graph Graph::createVirtualGraph(unsigned numTilesPerIPU) {
  if (target_.getNumIPUs() != 1)
    throw poplar_error("createVirtualGraph(numTilesPerIPU) is only emulated for single-IPU graphs; "
                       "use createVirtualGraph(lowerTile, upperTile)");
  return createVirtualGraph(0, numTilesPerIPU);
}

Graph Graph::getTopLevelGraph() { return Graph(state_, 0, state_->target); }
unsigned Graph::convertTileToTopLevelGraphTile(unsigned tile) const { return tileOffset_ + tile; }

unsigned Graph::checkTile(unsigned tile) const {
  if (tile >= target_.getNumTiles())
    throw invalid_tile_mapping(message("tile ", tile, " is out of range for a graph of ", target_.getNumTiles(),
                                       " tiles"));
  return tileOffset_ + tile;
}

// --- codelets -------------------------------------------------------------------

void Graph::addCodelets(StringRef src, CodeletFileType, StringRef, StringRef) {
  // The emulation links vertex classes into the program instead of loading
  // them: without a linked registry there is nothing to load.
  if (registeredCodeletsFiles().empty())
    throw graph_object_load_error(src.str(), "no vertex classes are linked into this program (run "
                                             "tools/popc-reflect.js on the codelets and link the "
                                             "codelets_registry.cpp it writes)");
  state_->codeletsLoaded = true;
}

void Graph::addCodelets(ArrayRef<std::string> xs, StringRef compileFlags, StringRef targetName) {
  for (const auto &x : xs) addCodelets(StringRef(x), CodeletFileType::Auto, compileFlags, targetName);
}

bool Graph::hasCodelet(StringRef name) const {
  return state_->codeletsLoaded && findVertex(canonicalVertexName(name.str())) != nullptr;
}

// --- tensors --------------------------------------------------------------------

Tensor Graph::addVariable(const Type &type, ArrayRef<std::size_t> shape, const DebugContext &debugContext) {
  if (type.id() == Type::Id::INVALID) throw type_error("addVariable: invalid element type");
  VarInfo v;
  const auto id = static_cast<unsigned>(state_->vars.size());
  v.name = debugContext.getPathName().empty() ? message("var", id) : debugContext.getPathName();
  v.type = type;
  v.numElements = product(shape.vec());
  state_->vars.push_back(std::move(v));
  std::vector<Region> regions;
  appendRegion(regions, id, 0, state_->vars[id].numElements);
  return makeTensor(state_.get(), type, shape.vec(), std::move(regions));
}

Tensor Graph::addVariable(const Type &type, ArrayRef<std::size_t> shape, VariableMappingMethod mapping,
                          const DebugContext &debugContext) {
  Tensor t = addVariable(type, shape, debugContext);
  if (mapping == VariableMappingMethod::LINEAR)
    mapLinearly(*this, t, (128 + target_.getTypeSize(type) - 1) / target_.getTypeSize(type),
                target_.getVectorWidth(type));
  return t;
}

Tensor Graph::addConstantValues(const Type &type, ArrayRef<std::size_t> shape, const std::vector<ScalarValue> &values,
                                bool splat, const DebugContext &debugContext) {
  Tensor t = addVariable(type, shape, debugContext.getPathName().empty() ? DebugContext("<const>") : debugContext);
  auto &v = state_->vars.back();
  if (!splat && values.size() != v.numElements)
    throw tensor_creation_error(message("addConstant: ", values.size(), " values for a tensor of shape ",
                                        shapeString(shape.vec()), " (", v.numElements, " elements)"));
  v.isConstant = true;
  const std::size_t es = type.size();
  v.constData.assign(v.numElements * es, 0);
  for (std::size_t i = 0; i < v.numElements; ++i)
    storeScalarValue(type.id(), v.constData.data() + i * es, splat ? values[0] : values[i]);
  return t;
}

Tensor Graph::addConstantHalf(const Type &type, ArrayRef<std::size_t> shape, std::uint16_t bits,
                              const DebugContext &debugContext) {
  if (type != HALF) throw type_error("addConstantHalf: the type must be HALF");
  Tensor t = addConstantValues(type, shape, {ScalarValue::of(0)}, true, debugContext);
  auto &v = state_->vars.back();
  for (std::size_t i = 0; i < v.numElements; ++i) std::memcpy(v.constData.data() + 2 * i, &bits, 2);
  return t;
}

Tensor Graph::clone(const Tensor &t, const DebugContext &debugContext, TensorCloneMethod method) {
  return clone(t.elementType(), t, debugContext, method);
}

Tensor Graph::clone(const Type &type, const Tensor &t, const DebugContext &debugContext, TensorCloneMethod) {
  const auto &src = impl(t);
  Tensor c = addVariable(type, src.shape, debugContext);
  auto &v = state_->vars.back();
  // Same tile for each element as the element it copies.
  std::size_t k = 0;
  for (const auto &r : src.regions) {
    const auto &tiles = state_->vars[r.var].tile;
    for (std::size_t e = r.begin; e < r.end; ++e, ++k) {
      const std::int32_t tile = tiles.empty() ? -1 : tiles[e];
      if (tile >= 0) {
        if (v.tile.empty()) v.tile.assign(v.numElements, -1);
        v.tile[k] = tile;
      }
    }
  }
  return c;
}

void Graph::setInitialTensorValues(const Tensor &t, const std::vector<ScalarValue> &values) {
  const auto &p = impl(t);
  if (values.size() != p.numElements)
    throw tensor_creation_error(message("setInitialValue: ", values.size(), " values for a tensor of ",
                                        p.numElements, " elements"));
  const std::size_t es = p.type.size();
  std::size_t k = 0;
  for (const auto &r : p.regions) {
    auto &v = state_->vars[r.var];
    if (v.isConstant) throw tensor_creation_error("setInitialValue: cannot set the value of a constant");
    if (v.initData.empty()) v.initData.assign(v.numElements * es, 0);
    for (std::size_t e = r.begin; e < r.end; ++e, ++k) storeScalarValue(p.type.id(), v.initData.data() + e * es, values[k]);
  }
}

// --- tile mapping ---------------------------------------------------------------

void Graph::setTileMapping(const Tensor &t, unsigned tileNum) {
  const auto &p = impl(t);
  const auto tile = static_cast<std::int32_t>(checkTile(tileNum));
  for (const auto &r : p.regions) {
    auto &v = state_->vars[r.var];
    if (v.tile.empty()) v.tile.assign(v.numElements, -1);
    std::fill(v.tile.begin() + static_cast<long>(r.begin), v.tile.begin() + static_cast<long>(r.end), tile);
  }
}

void Graph::setTileMapping(const Tensor &t, const TileToTensorMapping &mapping) {
  const auto &p = impl(t);
  if (mapping.size() > target_.getNumTiles())
    throw invalid_tile_mapping(message("setTileMapping: a mapping for ", mapping.size(), " tiles on a graph of ",
                                       target_.getNumTiles(), " tiles"));
  for (std::size_t tile = 0; tile < mapping.size(); ++tile) {
    const auto abs = static_cast<std::int32_t>(checkTile(static_cast<unsigned>(tile)));
    for (const auto &iv : mapping[tile]) {
      if (iv.end() > p.numElements || iv.begin() > iv.end())
        throw invalid_tile_mapping(message("setTileMapping: interval ", iv, " is outside a tensor of ",
                                           p.numElements, " elements"));
      forEachRegion(p, iv.begin(), iv.end(), [&](unsigned var, std::size_t b, std::size_t e) {
        auto &v = state_->vars[var];
        if (v.tile.empty()) v.tile.assign(v.numElements, -1);
        std::fill(v.tile.begin() + static_cast<long>(b), v.tile.begin() + static_cast<long>(e), abs);
      });
    }
  }
}

void Graph::setTileMapping(VertexRef v, unsigned tileNum) {
  if (v.getId() >= state_->vertices.size()) throw poplar_error("setTileMapping: unknown vertex");
  state_->vertices[v.getId()].tile = static_cast<int>(checkTile(tileNum));
}

Graph::TileToTensorMapping Graph::getTileMapping(const Tensor &t, bool *isComplete) const {
  const auto &p = impl(t);
  TileToTensorMapping out(target_.getNumTiles());
  bool complete = true;
  std::size_t k = 0;
  long lastTile = -2;
  for (const auto &r : p.regions) {
    const auto &tiles = state_->vars[r.var].tile;
    for (std::size_t e = r.begin; e < r.end; ++e, ++k) {
      const long abs = tiles.empty() ? -1 : tiles[e];
      const long rel = abs < 0 ? -1 : abs - static_cast<long>(tileOffset_);
      if (rel < 0 || rel >= static_cast<long>(target_.getNumTiles())) {
        if (abs >= 0)
          throw invalid_tile_mapping(message("getTileMapping: an element of ", t.getDebugStr(),
                                             " is mapped to tile ", abs, ", outside this graph"));
        complete = false;
        lastTile = -1;
        continue;
      }
      auto &ivs = out[static_cast<std::size_t>(rel)];
      if (lastTile == rel && !ivs.empty() && ivs.back().end() == k) ivs.back() = Interval(ivs.back().begin(), k + 1);
      else ivs.emplace_back(k, k + 1);
      lastTile = rel;
    }
  }
  if (isComplete) *isComplete = complete;
  return out;
}

Graph::TileToTensorMapping Graph::getTileMapping(const Tensor &t, bool requireComplete) const {
  bool complete = true;
  auto m = getTileMapping(t, &complete);
  if (requireComplete && !complete)
    throw invalid_tile_mapping(message("Tensor ", t.getDebugStr(), " has elements with no tile mapping"));
  return m;
}

// --- vertices -------------------------------------------------------------------

ComputeSet Graph::addComputeSet(const DebugContext &debugContext) {
  const auto id = static_cast<unsigned>(state_->computeSets.size());
  state_->computeSets.push_back({debugContext.getPathName().empty() ? message("cs", id) : debugContext.getPathName(), {}});
  return ComputeSet(id);
}

VertexRef Graph::addVertex(ComputeSet cs, StringRef vertexType) {
  if (cs.getId() >= state_->computeSets.size()) throw poplar_error("addVertex: unknown compute set");
  const std::string name = vertexType.str();
  const VertexDesc *desc = findVertex(canonicalVertexName(name));
  if (!desc)
    throw unknown_vertex_type(message("Unknown vertex type '", name, "'. Linked vertex types: ",
                                      listNames(registeredVertexNames())));
  if (!state_->codeletsLoaded)
    throw unknown_vertex_type(message("Vertex type '", name, "' is not available: call Graph::addCodelets first"));
  const auto id = static_cast<unsigned>(state_->vertices.size());
  VertexInfo v;
  v.typeName = name;
  v.desc = desc;
  v.computeSet = cs.getId();
  state_->vertices.push_back(std::move(v));
  state_->computeSets[cs.getId()].vertices.push_back(id);
  return VertexRef(id);
}

VertexRef Graph::addVertex(ComputeSet cs, StringRef vertexType, ArrayRef<ConnectionDesc> connections) {
  VertexRef v = addVertex(cs, vertexType);
  for (const auto &c : connections) {
    if (c.isList) connect(v[c.field], ArrayRef<Tensor>(c.ts));
    else connect(v[c.field], c.ts[0]);
  }
  return v;
}

namespace {
struct FieldLookup {
  VertexInfo &vertex;
  const FieldDesc &desc;
  FieldConnection &conn;
};

FieldLookup lookupField(GraphState &s, const FieldRef &field) {
  const unsigned id = field.getVertex().getId();
  if (id >= s.vertices.size()) throw poplar_error("field of an unknown vertex");
  auto &v = s.vertices[id];
  const FieldDesc *fd = v.desc->field(field.getName());
  if (!fd)
    throw unknown_field(message("Vertex type '", v.typeName, "' has no field '", field.getName(), "'"));
  if (!fd->supported)
    throw graph_connection_error(message("Field '", field.getName(), "' of vertex type '", v.typeName,
                                         "' has a C++ type the emulation cannot bind (pointer, array or struct)"));
  return {v, *fd, v.fields[field.getName()]};
}
} // namespace

void Graph::connect(FieldRef field, const Tensor &tensor) {
  auto f = lookupField(*state_, field);
  const auto &p = impl(tensor);
  const std::string where = message("field '", field.getName(), "' of ", vertexLabel(*state_, field.getVertex().getId()));
  if (f.desc.direction == FieldDirection::State)
    throw graph_connection_error(message("cannot connect a tensor to ", where, ": it is not an Input/Output/InOut "
                                         "field (use setInitialValue)"));
  if (p.graph != state_.get()) throw graph_connection_error(message("connecting ", where, " to a tensor of another graph"));
  if (p.type != f.desc.elementType)
    throw graph_connection_error(message("type mismatch connecting a ", p.type, " tensor to ", where, " of type ",
                                         f.desc.elementType));
  if (f.desc.direction != FieldDirection::In && tensor.containsConstant())
    throw graph_connection_error(message("cannot connect a constant to the writable ", where));
  if (f.desc.shape == FieldShape::Scalar && p.numElements != 1)
    throw graph_connection_error(message("connecting a tensor of ", p.numElements, " elements (shape ",
                                         shapeString(p.shape), ") to the scalar ", where));
  if (f.desc.shape == FieldShape::List) {
    if (!field.isIndexed())
      throw graph_connection_error(message(where, " is a list: connect a vector of tensors, or setFieldSize "
                                                  "and connect v[\"", field.getName(), "\"][i]"));
    if (!f.conn.sizeSet)
      throw no_size_specified(message("connecting element ", field.getIndex(), " of ", where,
                                      " before its size was set with setFieldSize"));
    if (field.getIndex() >= f.conn.tensors.size())
      throw index_error(message("element ", field.getIndex(), " of ", where, " which has ", f.conn.tensors.size(),
                                " elements"));
    f.conn.tensors[field.getIndex()] = tensor;
    f.conn.connected[field.getIndex()] = true;
    return;
  }
  if (field.isIndexed()) throw graph_connection_error(message(where, " is not a list; it cannot be indexed"));
  f.conn.tensors = {tensor};
  f.conn.connected = {true};
}

void Graph::connect(FieldRef field, ArrayRef<Tensor> tensors) {
  auto f = lookupField(*state_, field);
  if (f.desc.shape != FieldShape::List || field.isIndexed())
    throw graph_connection_error(message("field '", field.getName(), "' of ",
                                         vertexLabel(*state_, field.getVertex().getId()),
                                         " is not a list; connect a single tensor"));
  setFieldSize(field, tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) connect(field[i], tensors[i]);
}

void Graph::setFieldSize(FieldRef field, std::size_t size) {
  auto f = lookupField(*state_, field);
  if (f.desc.shape != FieldShape::List)
    throw graph_connection_error(message("setFieldSize: field '", field.getName(), "' of ",
                                         vertexLabel(*state_, field.getVertex().getId()), " is not a list"));
  f.conn.tensors.assign(size, Tensor());
  f.conn.connected.assign(size, false);
  f.conn.sizeSet = true;
}

std::size_t Graph::getFieldSize(FieldRef field) const {
  auto f = lookupField(*state_, field);
  if (f.desc.shape == FieldShape::List) {
    if (!f.conn.sizeSet) throw no_size_specified(message("field '", field.getName(), "' has no size yet"));
    return f.conn.tensors.size();
  }
  if (f.desc.direction == FieldDirection::State) return f.conn.values.size();
  return f.conn.tensors.empty() ? 0 : f.conn.tensors[0].numElements();
}

void Graph::setFieldValues(FieldRef field, const std::vector<ScalarValue> &values, bool isArray) {
  auto f = lookupField(*state_, field);
  const std::string where = message("field '", field.getName(), "' of ", vertexLabel(*state_, field.getVertex().getId()));
  if (f.desc.direction != FieldDirection::State)
    throw graph_connection_error(message("setInitialValue on ", where, ": it is an edge (connect a tensor instead)"));
  if (f.desc.shape == FieldShape::Scalar && (isArray || values.size() != 1))
    throw graph_connection_error(message("setInitialValue: ", where, " is a scalar"));
  f.conn.values = values;
  f.conn.valueSet = true;
}

void Graph::setPerfEstimate(const VertexRef &v, std::uint64_t cycles, std::uint64_t) {
  if (v.getId() >= state_->vertices.size()) throw poplar_error("setPerfEstimate: unknown vertex");
  state_->vertices[v.getId()].perfEstimate = cycles;
}

unsigned Graph::getNumVertices() const { return static_cast<unsigned>(state_->vertices.size()); }

// --- host access ----------------------------------------------------------------

namespace {
void checkHandleFree(const GraphState &s, const std::string &handle) {
  const bool hostFunction = std::any_of(s.hostFunctions.begin(), s.hostFunctions.end(),
                                        [&](const HostFunctionInfo &f) { return f.handle == handle; });
  if (s.streamByName.count(handle) || s.hostHandles.count(handle) || hostFunction)
    throw poplar_error(message("the host handle '", handle, "' is already in use"));
}
} // namespace

DataStream Graph::addHostToDeviceFIFO(StringRef handle, const Type &elementType, std::size_t numElements,
                                      ReplicatedStreamMode replicatedMode, const OptionFlags &) {
  checkHandleFree(*state_, handle.str());
  const auto id = static_cast<unsigned>(state_->streams.size());
  state_->streams.push_back({handle.str(), elementType, numElements, true, replicatedMode});
  state_->streamByName[handle.str()] = id;
  return DataStream(id, handle.str(), elementType, numElements, DataStreamType::HostToDeviceFIFO, replicatedMode,
                    state_->replicationFactor);
}

DataStream Graph::addDeviceToHostFIFO(StringRef handle, const Type &elementType, std::size_t numElements,
                                      const OptionFlags &) {
  checkHandleFree(*state_, handle.str());
  const auto id = static_cast<unsigned>(state_->streams.size());
  state_->streams.push_back({handle.str(), elementType, numElements, false, ReplicatedStreamMode::REPLICATE});
  state_->streamByName[handle.str()] = id;
  return DataStream(id, handle.str(), elementType, numElements, DataStreamType::DeviceToHostFIFO,
                    ReplicatedStreamMode::REPLICATE, state_->replicationFactor);
}

void Graph::createHostWrite(StringRef handle, const Tensor &t, bool) {
  checkHandleFree(*state_, handle.str());
  impl(t);
  if (t.containsConstant())
    throw poplar_error(message("createHostWrite('", handle.str(), "'): the tensor contains a constant"));
  state_->hostHandles[handle.str()] = {handle.str(), t, true};
}

void Graph::createHostRead(StringRef handle, const Tensor &t, bool) {
  checkHandleFree(*state_, handle.str());
  impl(t);
  state_->hostHandles[handle.str()] = {handle.str(), t, false};
}

HostFunction Graph::addHostFunction(StringRef handle, ArrayRef<HostFunctionArgument> inputs,
                                    ArrayRef<HostFunctionArgument> outputs) {
  checkHandleFree(*state_, handle.str());
  HostFunctionInfo f{handle.str(), {}, {}};
  for (const auto &a : inputs) f.inputs.emplace_back(std::get<0>(a), std::get<1>(a));
  for (const auto &a : outputs) f.outputs.emplace_back(std::get<0>(a), std::get<1>(a));
  state_->hostFunctions.push_back(std::move(f));
  return HostFunction(static_cast<unsigned>(state_->hostFunctions.size() - 1));
}

Function Graph::addFunction(const program::Program &program) {
  state_->functions.push_back(program);
  return Function(static_cast<unsigned>(state_->functions.size() - 1));
}

} // namespace poplar

// declared extern in poplar_host/ScalarValue.hpp
template class std::vector<poplar_host::ScalarValue>;
