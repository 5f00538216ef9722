// The engine's profile: with the autoReport.* engine options (given to the Engine or through
// POPLAR_ENGINE_OPTIONS, as Poplar reads them) the emulated engine writes profile.json into
// autoReport.directory: the target, memory per tile, the control program's steps and compute
// sets with their estimated cycles and, after every run, what it measured (wall time per step
// and compute set, host transfers, stream timestamps). The format is poplar-host's own (see
// the README's "Profiling"); the SDK's Poplar writes profile.pop for PopVision instead.
//
// Without those options the engine has no profiler and makes no timing calls at all.
#ifndef poplar_host_profile_hpp
#define poplar_host_profile_hpp

#include "internal.hpp"

#include <poplar/OptionFlags.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace poplar_host {

/// What the profile describes of a compiled graph (EngineRuntime.cpp fills it from its plans).
struct ProfileGraph {
  struct ComputeSet {
    unsigned id = 0;
    std::size_t vertices = 0, tiles = 0;
    /// Cycles of one execution: the slowest tile's summed vertex perf estimates, plus a sync.
    std::uint64_t cycles = 0;
    /// Vertices without a perf estimate (they count 0 cycles).
    std::size_t unestimated = 0;
  };
  poplar::Target target; ///< per replica
  unsigned replicas = 1;
  const GraphState *graph = nullptr;
  std::vector<std::shared_ptr<ProgramNode>> programs, functions;
  std::vector<std::uint64_t> tileBytes, alwaysLiveBytes; ///< one replica
  std::vector<ComputeSet> computeSets;                   ///< those the programs execute
};

class EngineProfiler {
public:
  using Clock = std::chrono::steady_clock;

  /// A profiler when the options ask for a profile (autoReport.all, autoReport.outputGraphProfile
  /// or autoReport.outputExecutionProfile), else nullptr.
  static std::unique_ptr<EngineProfiler> create(ProfileGraph graph, const poplar::OptionFlags &options);
  ~EngineProfiler();
  EngineProfiler(const EngineProfiler &) = delete;
  EngineProfiler &operator=(const EngineProfiler &) = delete;

  /// Whether runs are measured (autoReport.all or autoReport.outputExecutionProfile); without
  /// it the profile holds the compiled graph only.
  bool measuring() const;
  static Clock::time_point now() { return Clock::now(); }

  /// Engine::load: writes the profile (its execution part starts empty).
  void loaded();
  void beginRun(unsigned program);
  /// A node replica 0 ran from t0 until now. Safe from several threads (IPUs on threads).
  void step(const ProgramNode &n, Clock::time_point t0);
  /// The run finished: adds it to the totals and rewrites the profile.
  void endRun();
  /// writeTensor / readTensor / remote-buffer host copies, between runs.
  void hostAccess(bool write, std::size_t bytes, Clock::time_point t0);
  /// Engine::resetExecutionProfile: the measurements start again from nothing (profile rewritten).
  void reset();

private:
  struct Impl;
  explicit EngineProfiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The estimated cycles of a PopLibs step (the emulation computes PopLibs calls on the host, so
/// they have no vertices): from the sizes of the tensors it touches and its FLOPs, by the GC200
/// model of the compiler's estimates (packages/codegen-poplar/src/estimate.ts).
std::uint64_t popLibsStepCycles(const ProgramNode &n, const poplar::Target &target);

/// Cycles of one compute-set or PopLibs-step sync (estimate.ts's syncCycles).
constexpr std::uint64_t kSyncCycles = 100;

} // namespace poplar_host

#endif
