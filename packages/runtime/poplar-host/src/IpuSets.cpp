// IPU sets of programs and the per-IPU plans of Sequences (see ipusets.hpp).
#include "ipusets.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <thread>

namespace poplar_host {

namespace {

using Kind = ProgramNode::Kind;

/// The IPUs a program touches, as much as the planning needs: none, one, or
/// several (which includes "all IPUs": a barrier).
struct IpuSet {
  enum State : std::uint8_t { None, One, Many } state = None;
  unsigned ipu = 0;

  void add(unsigned i) {
    if (state == None) {
      state = One;
      ipu = i;
    } else if (state == One && ipu != i) {
      state = Many;
    }
  }
  void add(const IpuSet &o) {
    if (o.state == Many) state = Many;
    else if (o.state == One) add(o.ipu);
  }
};

/// What a program uses: its IPUs, and the streams and remote buffers it moves
/// data through (sorted ids; remote buffers after the streams).
struct Usage {
  IpuSet ipus;
  std::vector<unsigned> resources;

  void add(const Usage &o) {
    ipus.add(o.ipus);
    if (o.resources.empty()) return;
    std::vector<unsigned> merged;
    std::set_union(resources.begin(), resources.end(), o.resources.begin(), o.resources.end(),
                   std::back_inserter(merged));
    resources.swap(merged);
  }
  void addResource(unsigned r) {
    auto it = std::lower_bound(resources.begin(), resources.end(), r);
    if (it == resources.end() || *it != r) resources.insert(it, r);
  }
};

class Analysis {
public:
  explicit Analysis(const GraphState &s)
      : s_(s), tilesPerIpu_(s.target.getTilesPerIPU()), runs_(s.vars.size()), runsMade_(s.vars.size(), false),
        computeSets_(s.computeSets.size()), computeSetDone_(s.computeSets.size(), false) {}

  SequencePlans plans;

  const Usage &usage(const ProgramNode &n) {
    auto found = memo_.find(&n);
    if (found != memo_.end()) return found->second;
    Usage u;
    switch (n.kind) {
    case Kind::Sequence:
    case Kind::Repeat: {
      std::vector<const Usage *> kids;
      for (const auto &c : n.children) {
        kids.push_back(&usage(*c)); // memo_ is node-based: the pointers stay valid
        u.add(*kids.back());
      }
      if (n.kind == Kind::Sequence && u.ipus.state == IpuSet::Many) planSequence(n, kids);
      break;
    }
    case Kind::RepeatWhile:
    case Kind::If:
    case Kind::Switch:
      addTensor(n.src, u.ipus);
      for (const auto &c : n.children) u.add(usage(*c));
      break;
    case Kind::Call: u.add(usage(*s_.functions.at(n.id).getNode())); break;
    case Kind::Execute: u.ipus = computeSet(n.id); break;
    case Kind::CopyTensor:
      addTensor(n.src, u.ipus);
      addTensor(n.dst, u.ipus);
      break;
    case Kind::CopyFromStream:
    case Kind::CopyToStream:
      addTensor(n.kind == Kind::CopyFromStream ? n.dst : n.src, u.ipus);
      u.addResource(n.id);
      break;
    case Kind::CopyToRemote:
    case Kind::CopyFromRemote:
      addTensor(n.kind == Kind::CopyToRemote ? n.src : n.dst, u.ipus);
      addTensor(n.remoteOffset, u.ipus);
      u.addResource(static_cast<unsigned>(s_.streams.size()) + n.id);
      break;
    case Kind::Print: addTensor(n.src, u.ipus); break;
    case Kind::Nop: break;
    case Kind::HostStep: // a PopLibs call, a compute set on the IPU: `touches` lists all it reads or writes
      if (n.touches.empty()) u.ipus.state = IpuSet::Many;
      for (const auto &t : n.touches) addTensor(t, u.ipus);
      break;
    case Kind::Collective: // synchronises the IPUs of all replicas
    case Kind::Abort:      // stops everything
    default: u.ipus.state = IpuSet::Many; break;
    }
    return memo_.emplace(&n, std::move(u)).first->second;
  }

private:
  /// (first element, IPU) of each stretch of a variable on one IPU.
  const std::vector<std::pair<std::size_t, unsigned>> &runsOf(unsigned var) {
    auto &runs = runs_[var];
    if (runsMade_[var]) return runs;
    runsMade_[var] = true;
    const auto &tiles = s_.vars[var].tile;
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      const unsigned ipu = static_cast<unsigned>(tiles[i]) / tilesPerIpu_;
      if (runs.empty() || runs.back().second != ipu) runs.emplace_back(i, ipu);
    }
    return runs;
  }

  void addTensor(const poplar::Tensor &t, IpuSet &out) {
    if (!t.valid()) return;
    for (const auto &r : impl(t).regions) {
      if (out.state == IpuSet::Many) return;
      if (s_.vars[r.var].isConstant || r.size() == 0) continue; // read-only: never raced on
      const auto &runs = runsOf(r.var);
      auto it = std::upper_bound(runs.begin(), runs.end(), std::make_pair(r.begin, ~0u));
      if (it != runs.begin()) --it;
      for (; it != runs.end() && it->first < r.end; ++it) out.add(it->second);
    }
  }

  /// The vertices' tiles and every tensor they are connected to (a vertex
  /// reading another IPU's memory must not run beside that IPU).
  IpuSet computeSet(unsigned cs) {
    if (computeSetDone_[cs]) return computeSets_[cs];
    IpuSet u;
    for (unsigned v : s_.computeSets[cs].vertices) {
      const auto &vi = s_.vertices[v];
      u.add(static_cast<unsigned>(vi.tile) / tilesPerIpu_);
      for (const auto &f : vi.fields)
        for (std::size_t i = 0; i < f.second.tensors.size(); ++i)
          if (f.second.connected[i]) addTensor(f.second.tensors[i], u);
    }
    computeSetDone_[cs] = true;
    return computeSets_[cs] = u;
  }

  /// Splits the children into maximal runs of one-IPU children; a run that
  /// involves two or more IPUs becomes a ParallelRun.
  void planSequence(const ProgramNode &n, const std::vector<const Usage *> &kids) {
    SequencePlan plan;
    plan.numChildren = kids.size();
    ParallelRun run;
    std::vector<unsigned> laneIpu;
    std::vector<std::size_t> pending;      // children touching no IPU before the first lane
    std::map<unsigned, std::size_t> owner; // stream or remote buffer -> lane using it
    std::size_t begin = 0;
    auto close = [&](std::size_t end) {
      if (run.lanes.size() >= 2) {
        run.begin = begin;
        run.end = end;
        plan.runs.push_back(std::move(run));
      }
      run = ParallelRun();
      laneIpu.clear();
      pending.clear();
      owner.clear();
      begin = end;
    };
    for (std::size_t i = 0; i < kids.size(); ++i) {
      const Usage &u = *kids[i];
      // a barrier runs alone (so does a copy of nothing through a stream, to keep the stream's order)
      if (u.ipus.state == IpuSet::Many || (u.ipus.state == IpuSet::None && !u.resources.empty())) {
        close(i);
        begin = i + 1;
        continue;
      }
      if (u.ipus.state == IpuSet::None) { // no effect on any IPU: any lane will do
        if (run.lanes.empty()) pending.push_back(i);
        else run.lanes[0].push_back(i);
        continue;
      }
      auto at = std::find(laneIpu.begin(), laneIpu.end(), u.ipus.ipu);
      std::size_t lane = static_cast<std::size_t>(at - laneIpu.begin());
      // A stream or remote buffer another lane uses: the order of their copies matters.
      bool shared = false;
      for (unsigned r : u.resources) {
        auto o = owner.find(r);
        if (o != owner.end() && o->second != lane) shared = true;
      }
      if (shared) {
        close(i);
        lane = 0;
        at = laneIpu.end();
      }
      if (at == laneIpu.end()) {
        lane = laneIpu.size();
        laneIpu.push_back(u.ipus.ipu);
        run.lanes.push_back(run.lanes.empty() ? std::move(pending) : std::vector<std::size_t>());
        pending.clear();
      }
      run.lanes[lane].push_back(i);
      for (unsigned r : u.resources) owner[r] = lane;
    }
    close(kids.size());
    if (!plan.runs.empty()) plans[&n] = std::move(plan);
  }

  const GraphState &s_;
  const unsigned tilesPerIpu_;
  std::unordered_map<const ProgramNode *, Usage> memo_;
  std::vector<std::vector<std::pair<std::size_t, unsigned>>> runs_;
  std::vector<bool> runsMade_;
  std::vector<IpuSet> computeSets_;
  std::vector<bool> computeSetDone_;
};

} // namespace

SequencePlans planIpuConcurrency(const GraphState &s, const std::vector<std::shared_ptr<ProgramNode>> &programs) {
  if (s.target.getNumIPUs() < 2) return {}; // nothing to run side by side
  Analysis a(s);
  for (const auto &p : programs) a.usage(*p);
  return std::move(a.plans);
}

TaskPool::~TaskPool() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto &t : threads_) t.join();
}

void TaskPool::loop(std::size_t worker, std::uint64_t seen) {
  std::unique_lock<std::mutex> lock(m_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (worker + 1 >= n_) continue; // not needed this time
    const auto *task = task_;
    lock.unlock();
    (*task)(worker + 1);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

void TaskPool::run(std::size_t n, const std::function<void(std::size_t)> &task) {
  std::size_t onWorkers = 0;
  {
    std::lock_guard<std::mutex> lock(m_);
    try {
      while (threads_.size() + 1 < n) threads_.emplace_back(&TaskPool::loop, this, threads_.size(), generation_);
    } catch (...) { // no more threads: the tasks without a worker run here
    }
    onWorkers = std::min(n, threads_.size() + 1);
    task_ = &task;
    n_ = onWorkers;
    pending_ = onWorkers > 0 ? onWorkers - 1 : 0;
    ++generation_;
  }
  wake_.notify_all();
  for (std::size_t i = 0; i < n; ++i)
    if (i == 0 || i >= onWorkers) task(i);
  std::unique_lock<std::mutex> lock(m_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

bool ipuThreadsEnabled() {
  const char *env = std::getenv("POPLAR_HOST_IPU_THREADS");
  return !(env && std::strcmp(env, "0") == 0);
}

} // namespace poplar_host
