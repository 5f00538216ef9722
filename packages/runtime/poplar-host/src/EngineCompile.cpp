// Compiling a graph for an engine: the programs are checked, and the memory of each
// tile, the vertex binding plans and the IPU threads of Sequences are planned.
#include "engine_options.hpp"
#include "engine_runtime.hpp"
#include "liveness.hpp"

#include <poplar/exceptions.hpp>

#include <algorithm>
#include <set>

namespace poplar_host {

using Kind = ProgramNode::Kind;

namespace {

void checkTensorOfGraph(const GraphState &s, const poplar::Tensor &t, const char *what) {
  if (!t.valid()) return;
  if (impl(t).graph != &s) throw poplar::graph_program_compilation_error(message(what, " uses a tensor of another graph"));
}

/// A host function call's tensors match the function's arguments in type and size.
void checkHostCall(const GraphState &s, const ProgramNode &n) {
  if (n.id >= s.hostFunctions.size()) throw poplar::graph_program_compilation_error("Call of an unknown host function");
  const auto &f = s.hostFunctions[n.id];
  if (n.count != f.inputs.size() || n.touches.size() - n.count != f.outputs.size())
    throw poplar::graph_program_compilation_error(message("Call of host function '", f.handle, "' with ", n.count, " inputs and ",
                                                          n.touches.size() - n.count, " outputs; it takes ", f.inputs.size(),
                                                          " and ", f.outputs.size()));
  for (std::size_t i = 0; i < n.touches.size(); ++i) {
    const bool in = i < n.count;
    const auto &arg = in ? f.inputs[i] : f.outputs[i - n.count];
    const auto &t = impl(n.touches[i]);
    if (t.type != arg.first || t.numElements != arg.second)
      throw poplar::graph_program_compilation_error(message("Call of host function '", f.handle, "': ", in ? "input " : "output ",
                                                            in ? i : i - n.count, " is ", t.type, shapeString(t.shape), " but the function takes ",
                                                            arg.second, " ", arg.first, " elements"));
  }
}

/// Walks a program tree: checks references and collects compute sets and
/// functions. Programs may share sub-programs but not contain themselves.
void walkProgram(const GraphState &s, const std::shared_ptr<ProgramNode> &n, std::set<unsigned> &computeSets,
                 std::set<unsigned> &functions, std::set<const ProgramNode *> &done,
                 std::set<const ProgramNode *> &active) {
  if (active.count(n.get())) throw poplar::graph_cycle_error("a program contains itself");
  if (done.count(n.get())) return;
  active.insert(n.get());
  switch (n->kind) {
  case Kind::Execute:
    if (n->id >= s.computeSets.size()) throw poplar::graph_program_compilation_error("Execute of an unknown compute set");
    computeSets.insert(n->id);
    break;
  case Kind::CopyFromStream:
  case Kind::CopyToStream:
    if (n->id >= s.streams.size()) throw poplar::graph_program_compilation_error("Copy with a stream of another graph");
    break;
  case Kind::HostCall: checkHostCall(s, *n); break;
  case Kind::Call:
    if (n->id >= s.functions.size()) throw poplar::graph_program_compilation_error("Call of an unknown function");
    functions.insert(n->id);
    walkProgram(s, s.functions[n->id].getNode(), computeSets, functions, done, active);
    break;
  default: break;
  }
  checkTensorOfGraph(s, n->src, "a program");
  checkTensorOfGraph(s, n->dst, "a program");
  for (const auto &c : n->children) walkProgram(s, c, computeSets, functions, done, active);
  active.erase(n.get());
  done.insert(n.get());
}
} // namespace

std::shared_ptr<CompiledGraph> compileForEngine(const poplar::Graph &graph,
                                                poplar::ArrayRef<poplar::program::Program> progs,
                                                const poplar::OptionFlags &opts) {
  const auto &s = state(graph);
  auto cg = std::make_shared<CompiledGraph>();
  cg->graph = graph.getState();
  cg->target = s.target;
  cg->replicas = s.replicationFactor;
  cg->vars.reserve(s.vars.size());
  for (const auto &v : s.vars) { // everything but the tile mapping, which only compile needs
    VarInfo c;
    c.name = v.name;
    c.type = v.type;
    c.numElements = v.numElements;
    c.isConstant = v.isConstant;
    c.constData = v.constData;
    c.initData = v.initData;
    cg->vars.push_back(std::move(c));
  }
  cg->streams = s.streams;
  cg->hostFunctions = s.hostFunctions;
  cg->hostHandles = s.hostHandles;
  cg->options = opts;
  const poplar::OptionFlags effective = withEnvironmentOptions(opts);
  cg->numVertices = s.vertices.size();

  // Every variable and constant must be mapped completely.
  for (const auto &v : s.vars) {
    if (v.numElements == 0) continue;
    if (v.tile.empty() || std::find(v.tile.begin(), v.tile.end(), -1) != v.tile.end())
      throw poplar::invalid_graph(message("Tensor ", v.name, " has no tile mapping"));
  }

  std::set<unsigned> usedComputeSets, usedFunctions;
  std::set<const ProgramNode *> done, active;
  for (const auto &p : progs) {
    cg->programs.push_back(p.getNode());
    walkProgram(s, p.getNode(), usedComputeSets, usedFunctions, done, active);
  }
  for (const auto &f : s.functions) cg->functions.push_back(f.getNode());

  // Vertices: tile, fields, and their share of tile memory.
  const unsigned numTiles = s.target.getNumTiles();
  // Tensors by liveness; vertex state is always live.
  const TileMemory mem = planTileMemory(s, cg->programs);
  cg->tileBytes = mem.total();
  cg->alwaysLiveBytes = mem.alwaysLive;
  for (unsigned cs = 0; cs < s.computeSets.size(); ++cs) {
    ComputeSetPlan plan;
    plan.name = s.computeSets[cs].name;
    for (unsigned id : s.computeSets[cs].vertices) {
      const auto &v = s.vertices[id];
      if (v.tile < 0)
        throw poplar::invalid_tile_mapping(message("Vertex ", id, " ('", v.typeName, "' in compute set '", plan.name,
                                                   "') has no tile mapping"));
      VertexPlan vp = planVertex(s, id);
      cg->tileBytes[static_cast<std::size_t>(v.tile)] += vertexStateBytes(vp);
      cg->alwaysLiveBytes[static_cast<std::size_t>(v.tile)] += vertexStateBytes(vp);
      plan.fieldBytes += vp.fieldBytes;
      plan.tiles.push_back(vp.tile);
      plan.vertices.push_back(std::move(vp));
    }
    planInPlace(plan, cg->vars);
    std::sort(plan.tiles.begin(), plan.tiles.end());
    plan.tiles.erase(std::unique(plan.tiles.begin(), plan.tiles.end()), plan.tiles.end());
    if (usedComputeSets.count(cs)) cg->computeSets[cs] = std::move(plan);
  }
  cg->sequencePlans = planIpuConcurrency(s, cg->programs);

  if (effective.get("debug.allowOutOfMemory", "false") != "true") {
    const std::uint64_t limit = s.target.getBytesPerTile();
    for (unsigned t = 0; t < numTiles; ++t)
      if (cg->tileBytes[t] > limit)
        throw poplar::graph_memory_allocation_error(message("Out of memory on tile ", t, ": ", cg->tileBytes[t],
                                                            " bytes used but tiles only have ", limit,
                                                            " bytes of memory"));
  }
  return cg;
}

} // namespace poplar_host
