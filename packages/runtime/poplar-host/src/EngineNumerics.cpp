// The engine's floating-point behaviour: each tile's mode (engine options, then
// setFloatingPointBehaviour) and stochastic rounding seed, and the messages of
// floating-point exceptions.
//
// A tile's generator state is seeds_[replica][tile]: a vertex or PopLibs step draws its
// stochastic rounding from it (and its own number), and the state advances after every
// compute set or step that rounded stochastically on the tile. Reseeding restarts it.
#include "engine_runtime.hpp"

#include <functional>
#include <set>

namespace poplar_host {

using Kind = ProgramNode::Kind;

/// Every tile of every replica as the engine options leave it.
void EngineRuntime::resetNumerics() {
  const std::size_t tiles = cg_->target.getNumTiles();
  fp_.assign(cg_->replicas, std::vector<FpMode>(tiles, initialMode_));
  seeds_.assign(cg_->replicas, std::vector<std::uint64_t>(tiles, 0));
  for (unsigned r = 0; r < cg_->replicas; ++r)
    for (std::size_t t = 0; t < tiles; ++t) seeds_[r][t] = mix64(mix64(initialSeed_ ^ mix64(r)) + t);
}

void EngineRuntime::advanceGenerator(unsigned replica, unsigned tile) {
  if (fp_[replica][tile].esr) seeds_[replica][tile] = mix64(seeds_[replica][tile]);
}

/// Host steps get numbers in program order, so that their stochastic rounding does not
/// depend on where they sit in memory.
void EngineRuntime::numberHostSteps() {
  std::set<const ProgramNode *> seen;
  std::function<void(const ProgramNode &)> walk = [&](const ProgramNode &n) {
    if (!seen.insert(&n).second) return;
    if (n.kind == Kind::HostStep) stepIds_.emplace(&n, stepIds_.size());
    for (const auto &c : n.children) walk(*c);
  };
  for (const auto &p : cg_->programs) walk(*p);
  for (const auto &f : cg_->functions) walk(*f);
}

/// Distinguishes a host step from the others rounding on the same tile.
std::uint64_t EngineRuntime::stepKey(const ProgramNode &n) {
  std::lock_guard<std::mutex> lock(stepMutex_);
  const auto id = stepIds_.emplace(&n, stepIds_.size()).first->second; // steps added after the engine was made
  return mix64(id + 1);
}

std::string EngineRuntime::fpExceptionMessage(unsigned flags, const std::string &where, unsigned tile,
                                              unsigned replica) const {
  return message("floating point exception (", fpFlagNames(flags), ") in ", where, " on tile ", tile,
                 cg_->replicas > 1 ? message(" of replica ", replica) : std::string());
}

std::string fpFlagNames(unsigned flags) {
  std::string out;
  auto add = [&](unsigned f, const char *name) {
    if (!(flags & f)) return;
    if (!out.empty()) out += ", ";
    out += name;
  };
  add(kFpInvalid, "invalid operation");
  add(kFpDivZero, "divide by zero");
  add(kFpOverflow, "overflow");
  return out;
}

} // namespace poplar_host
