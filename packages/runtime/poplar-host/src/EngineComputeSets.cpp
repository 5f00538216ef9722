// Running a compute set: every vertex gathers its fields and computes, on the spare
// threads when the compute set is large, then the outputs are scattered back (see
// engine_runtime.hpp and vertexplan.hpp).
#include "engine_runtime.hpp"

#include <poplar/exceptions.hpp>

#include <algorithm>
#include <cfenv>
#include <exception>
#include <thread>

namespace poplar_host {

namespace {

/// The CPU's exception flags as tile flags.
unsigned cpuFpFlags() {
  const int f = std::fetestexcept(FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW);
  return ((f & FE_INVALID) ? kFpInvalid : 0u) | ((f & FE_DIVBYZERO) ? kFpDivZero : 0u) |
         ((f & FE_OVERFLOW) ? kFpOverflow : 0u);
}

/// Makes `half` round as a tile does while a vertex runs.
class ArithmeticScope {
public:
  explicit ArithmeticScope(TileArithmetic *a) : saved_(tileArithmetic) { tileArithmetic = a; }
  ~ArithmeticScope() { tileArithmetic = saved_; }
  ArithmeticScope(const ArithmeticScope &) = delete;
  ArithmeticScope &operator=(const ArithmeticScope &) = delete;

private:
  TileArithmetic *saved_;
};

} // namespace

/// Gathers the fields of vertices [begin, end) and runs them.
void EngineRuntime::gatherAndCompute(std::vector<std::unique_ptr<VertexInstance>> &insts, std::size_t begin,
                                     std::size_t end, unsigned replica) {
  for (std::size_t k = begin; k < end; ++k) {
    auto &inst = *insts[k];
    for (const auto &m : inst.gathers) gatherMove(m);
    const unsigned tile = inst.plan->tile;
    const FpMode &mode = fp_[replica][tile];
    if (mode.ieee()) {
      compute(inst);
      continue;
    }
    // the tile's behaviour: half rounds through `arith`; traps read the CPU's flags too
    TileArithmetic arith;
    arith.mode = mode;
    arith.rng = mix64(seeds_[replica][tile] ^ mix64(inst.plan->id));
    const unsigned traps = mode.traps();
    if (traps) std::feclearexcept(FE_ALL_EXCEPT);
    {
      ArithmeticScope scope(&arith);
      compute(inst);
    }
    const unsigned flags = (arith.flags | (traps ? cpuFpFlags() : 0u)) & traps;
    if (flags) throw poplar::application_runtime_error(fpExceptionMessage(flags, inst.plan->label, tile, replica));
  }
}

void EngineRuntime::compute(VertexInstance &inst) {
  const VertexDesc &d = *inst.plan->desc;
  const unsigned failed = d.compute(inst.obj);
  if (failed < d.numWorkers)
    throw poplar::application_runtime_error(message(inst.plan->label, " returned false from compute()",
                                                    d.multiVertex ? message(" on worker ", failed) : std::string()));
}

void EngineRuntime::execute(unsigned cs, unsigned replica) {
  auto &insts = instances_.at(cs)[replica];
  // Vertices write only their own buffers, or parts no other vertex touches,
  // until the scatter below, so splitting gather+compute over threads keeps
  // the BSP semantics; large
  // compute sets of a single replica use the spare cores this way (unless
  // the IPUs already run on threads).
  const unsigned threads = spareThreads();
  if (threads > 1 && insts.size() >= 2 && cg_->computeSets.at(cs).fieldBytes >= kParallelBytes) {
    const std::size_t n = insts.size(), chunks = std::min<std::size_t>(threads, n);
    std::vector<std::exception_ptr> errors(chunks);
    std::vector<std::thread> pool;
    for (std::size_t c = 1; c < chunks; ++c)
      pool.emplace_back([&, c] {
        try {
          gatherAndCompute(insts, n * c / chunks, n * (c + 1) / chunks, replica);
        } catch (...) {
          errors[c] = std::current_exception();
        }
      });
    try {
      gatherAndCompute(insts, 0, n / chunks, replica);
    } catch (...) {
      errors[0] = std::current_exception();
    }
    for (auto &t : pool) t.join();
    for (auto &e : errors)
      if (e) std::rethrow_exception(e);
  } else {
    gatherAndCompute(insts, 0, insts.size(), replica);
  }
  for (auto &inst : insts)
    for (const auto &m : inst->scatters) scatterMove(m);
  for (unsigned tile : cg_->computeSets.at(cs).tiles) advanceGenerator(replica, tile);
}

} // namespace poplar_host
