// Vertex plans, in-place binding and the moves between variables and vertex buffers (see
// vertexplan.hpp).
#include "vertexplan.hpp"

#include <poplar/exceptions.hpp>

#include <algorithm>
#include <cstring>

namespace poplar_host {

namespace {
std::size_t align8(std::size_t n) { return (n + 7) & ~std::size_t(7); }
} // namespace

VertexPlan planVertex(const GraphState &s, unsigned id) {
  const auto &v = s.vertices[id];
  VertexPlan p;
  p.id = id;
  p.tile = v.tile < 0 ? 0u : static_cast<unsigned>(v.tile);
  p.desc = v.desc;
  p.label = vertexLabel(s, id);
  for (const auto &fd : v.desc->fields) {
    if (!fd.supported) continue;
    auto it = v.fields.find(fd.name);
    if (fd.direction == FieldDirection::State) {
      if (it == v.fields.end() || !it->second.valueSet)
        throw poplar::graph_connection_error(message("Field '", fd.name, "' of ", p.label,
                                                     " has no value (set it with Graph::setInitialValue)"));
      p.states.emplace_back(&fd, it->second.values);
      continue;
    }
    const bool connected = it != v.fields.end() && (fd.shape == FieldShape::List ? it->second.sizeSet
                                                                                  : !it->second.tensors.empty());
    if (!connected)
      throw poplar::graph_connection_error(message("Field '", fd.name, "' of ", p.label, " is not connected"));
    const auto &conn = it->second;
    EdgePlan e;
    e.desc = &fd;
    e.elemSize = fd.elementType.size();
    e.write = fd.direction != FieldDirection::In;
    for (std::size_t i = 0; i < conn.tensors.size(); ++i) {
      if (!conn.connected[i])
        throw poplar::graph_connection_error(message("Element ", i, " of field '", fd.name, "' of ", p.label,
                                                     " is not connected"));
      const auto &t = impl(conn.tensors[i]);
      e.parts.push_back(t.regions);
      e.partElems.push_back(t.numElements);
      p.fieldBytes += t.numElements * e.elemSize;
    }
    e.partOffset.assign(e.parts.size(), 0);
    e.inPlace.assign(e.parts.size(), false);
    p.edges.push_back(std::move(e));
  }
  return p;
}

std::uint64_t vertexStateBytes(const VertexPlan &p) {
  std::uint64_t bytes = 4;
  for (const auto &e : p.edges) {
    if (e.desc->shape == FieldShape::Scalar) bytes += 4;
    else if (e.desc->shape == FieldShape::Vector) bytes += 8;
    else bytes += 4 + 8 * e.parts.size();
  }
  for (const auto &s : p.states) {
    const std::size_t es = s.first->elementType.size();
    if (s.first->shape == FieldShape::Scalar) bytes += (es + 3) & ~std::size_t(3);
    else bytes += 8 + ((es * s.second.size() + 3) & ~std::size_t(3));
  }
  return bytes;
}

namespace {
void layOutBuffers(ComputeSetPlan &plan) {
  for (auto &vp : plan.vertices) {
    vp.bufferBytes = 0;
    for (auto &e : vp.edges)
      for (std::size_t i = 0; i < e.parts.size(); ++i) {
        if (e.inPlace[i]) continue;
        e.partOffset[i] = vp.bufferBytes;
        vp.bufferBytes += align8(e.partElems[i] * e.elemSize);
      }
  }
}
} // namespace

void planInPlace(ComputeSetPlan &plan, const std::vector<VarInfo> &vars) {
  // A written part is a candidate when it is one run of a variable (not a constant). Bytes are
  // compared: fields of different element types may view one variable.
  struct Candidate {
    unsigned var;
    std::size_t begin, end; ///< bytes
    EdgePlan *edge;
    std::size_t part;
    bool clash;
  };
  std::vector<Candidate> candidates;
  for (auto &vp : plan.vertices)
    for (auto &e : vp.edges)
      for (std::size_t i = 0; i < e.parts.size(); ++i) {
        const auto &regions = e.parts[i];
        if (regions.size() != 1) continue;
        if (!e.write) {
          e.inPlace[i] = true; // vertices never write what another part reads: see below
          continue;
        }
        const Region &r = regions[0];
        if (!vars[r.var].isConstant && r.size() > 0)
          candidates.push_back({r.var, r.begin * e.elemSize, r.end * e.elemSize, &e, i, false});
      }
  if (candidates.empty()) return layOutBuffers(plan);
  const auto before = [](const Candidate &a, const Candidate &b) {
    return a.var != b.var ? a.var < b.var : a.begin < b.begin;
  };
  std::sort(candidates.begin(), candidates.end(), before);
  // candidates overlapping one another clash: in order of start, one overlaps an earlier one
  // exactly when it starts before the furthest end so far (and then overlaps that one too)
  for (std::size_t k = 1, furthest = 0; k < candidates.size(); ++k) {
    Candidate &c = candidates[k], &f = candidates[furthest];
    if (c.var == f.var && c.begin < f.end) {
      c.clash = f.clash = true;
      if (c.end > f.end) furthest = k;
    } else {
      furthest = k;
    }
  }
  // every other part's regions clash with the candidates they overlap; the candidates left
  // are disjoint, so sorted by start they are sorted by end too
  std::vector<Candidate *> disjoint;
  for (auto &c : candidates)
    if (!c.clash) disjoint.push_back(&c);
  const auto overlapOthers = [&](const EdgePlan &e, std::size_t part) {
    for (const auto &r : e.parts[part]) {
      const std::size_t b = r.begin * e.elemSize, end = r.end * e.elemSize;
      if (b == end) continue;
      auto it = std::lower_bound(disjoint.begin(), disjoint.end(), r, [&](const Candidate *c, const Region &x) {
        return c->var != x.var ? c->var < x.var : c->end <= b;
      });
      for (; it != disjoint.end() && (*it)->var == r.var && (*it)->begin < end; ++it) (*it)->clash = true;
    }
  };
  for (auto &vp : plan.vertices)
    for (auto &e : vp.edges)
      for (std::size_t i = 0; i < e.parts.size(); ++i) {
        const bool candidate = e.write && e.parts[i].size() == 1 && !vars[e.parts[i][0].var].isConstant &&
                               e.parts[i][0].size() > 0;
        if (!candidate) overlapOthers(e, i);
      }
  for (const auto &c : candidates)
    if (!c.clash) c.edge->inPlace[c.part] = true;
  layOutBuffers(plan);
}

namespace {
/// Appends a run of bytes to the moves of one field part (those from `first` on), as one more
/// step of the last move when it continues that move's stride: the regions of broadcast and
/// strided views, one element each, become a few moves.
void addMove(std::vector<VertexInstance::Move> &moves, std::size_t first, std::uint8_t *var, std::uint8_t *buf,
             std::size_t bytes) {
  if (moves.size() > first && moves.back().bufStride == 0) {
    auto &m = moves.back();
    const std::ptrdiff_t step = var - (m.var + (m.count - 1) * m.stride);
    if (m.bytes == bytes && (m.count == 1 || step == m.stride)) {
      m.stride = step;
      ++m.count;
      return;
    }
  }
  moves.push_back({var, buf, bytes, 1, 0, 1, 0, 0});
}

/// The runs of one read-only field part, one after another in the buffer, with those that
/// interleave `period` strided views, one run of each in turn (a concatenation along an inner
/// axis of size 1: the phases of a strided convolution's input gradient, a row at a time),
/// folded into one move per view with its runs period runs apart in the buffer: one move per
/// view and row instead of one per element. The other runs are left to addMove.
std::vector<VertexInstance::Move> foldInterleaved(const std::vector<VertexInstance::Move> &in) {
  constexpr std::size_t kMaxPeriod = 8, kMinRounds = 4;
  using Move = VertexInstance::Move;
  const std::size_t n = in.size();
  if (n < kMinRounds * 2) return in;
  // a plain strided view (one stride throughout) is addMove's
  const auto strided = [&](std::size_t k) {
    return k + 2 < n && in[k + 2].var - in[k + 1].var == in[k + 1].var - in[k].var;
  };
  std::vector<Move> out;
  for (std::size_t k = 0; k < n;) {
    if (strided(k)) {
      out.push_back(in[k++]);
      continue;
    }
    std::size_t bestPeriod = 0, bestLength = 0;
    for (std::size_t period = 2; period <= kMaxPeriod && k + kMinRounds * period <= n; ++period) {
      std::size_t j = k;
      // every view steps evenly through its variable; the runs lie one after another in the buffer
      while (j < n && in[j].bytes == in[k].bytes && in[j].buf == in[k].buf + (j - k) * in[k].bytes &&
             (j < k + 2 * period || in[j].var - in[j - period].var == in[j - period].var - in[j - 2 * period].var))
        ++j;
      if (j - k >= kMinRounds * period && j - k > bestLength) bestPeriod = period, bestLength = j - k;
    }
    if (bestPeriod == 0) {
      out.push_back(in[k++]);
      continue;
    }
    for (std::size_t r = 0; r < bestPeriod; ++r) {
      const Move &m = in[k + r];
      const std::size_t count = (bestLength - r + bestPeriod - 1) / bestPeriod;
      out.push_back({m.var, m.buf, m.bytes, count, in[k + r + bestPeriod].var - m.var, 1, 0, bestPeriod * m.bytes});
    }
    k += bestLength;
  }
  return out;
}

/// Folds the moves of one field part (those from `first` on) that repeat the move before them a
/// fixed distance further on in the variable into repeats of it: a broadcast over an outer dim
/// of a contiguous or strided view becomes one move.
void foldRepeats(std::vector<VertexInstance::Move> &moves, std::size_t first) {
  std::size_t kept = first;
  for (std::size_t k = first; k < moves.size(); ++k) {
    const auto m = moves[k];
    if (kept > first) {
      auto &last = moves[kept - 1];
      const std::ptrdiff_t step = m.var - (last.var + std::ptrdiff_t(last.repeats - 1) * last.repeatStride);
      if (m.bufStride == 0 && last.bufStride == 0 && m.bytes == last.bytes && m.count == last.count &&
          m.stride == last.stride && (last.repeats == 1 || step == last.repeatStride)) {
        last.repeatStride = step;
        ++last.repeats;
        continue;
      }
    }
    moves[kept++] = m;
  }
  moves.resize(kept);
}

/// Copies `count` runs of `bytes`, `stride` apart in the variable, into the buffer.
void gatherRuns(std::uint8_t *buf, const std::uint8_t *var, std::size_t bytes, std::size_t count, std::ptrdiff_t stride) {
  if (count == 1 || stride == static_cast<std::ptrdiff_t>(bytes)) {
    std::memcpy(buf, var, bytes * count);
  } else if (bytes == 4) {
    for (std::size_t k = 0; k < count; ++k, var += stride) std::memcpy(buf + 4 * k, var, 4);
  } else {
    for (std::size_t k = 0; k < count; ++k, var += stride, buf += bytes) std::memcpy(buf, var, bytes);
  }
}

/// Copies `count` runs of `bytes` from the buffer to `stride` apart in the variable, in order.
void scatterRuns(std::uint8_t *var, const std::uint8_t *buf, std::size_t bytes, std::size_t count, std::ptrdiff_t stride) {
  if (count == 1 || stride == static_cast<std::ptrdiff_t>(bytes)) {
    std::memcpy(var, buf, bytes * count);
  } else if (stride == 0) { // every run lands on the same bytes: the last one stays
    std::memcpy(var, buf + bytes * (count - 1), bytes);
  } else if (bytes == 4) {
    for (std::size_t k = 0; k < count; ++k, var += stride) std::memcpy(var, buf + 4 * k, 4);
  } else {
    for (std::size_t k = 0; k < count; ++k, var += stride, buf += bytes) std::memcpy(var, buf, bytes);
  }
}

/// Fills `total` bytes of `buf` with copies of its first `bytes`, doubling what is there.
void repeatPrefix(std::uint8_t *buf, std::size_t bytes, std::size_t total) {
  for (std::size_t done = bytes; done < total; done *= 2) std::memcpy(buf + done, buf, std::min(done, total - done));
}
} // namespace

std::unique_ptr<VertexInstance> makeVertexInstance(const VertexPlan &vp,
                                                   const std::function<std::uint8_t *(unsigned)> &varData) {
  auto inst = std::make_unique<VertexInstance>();
  inst->plan = &vp;
  inst->buffer.assign(std::max<std::size_t>(vp.bufferBytes, 8), 0);
  inst->obj = vp.desc->create();
  for (const auto &e : vp.edges) {
    std::vector<BindRegion> regions;
    for (std::size_t i = 0; i < e.parts.size(); ++i) {
      std::uint8_t *buf = inst->buffer.data() + e.partOffset[i];
      if (e.inPlace[i]) {
        const Region &r = e.parts[i][0];
        regions.push_back({varData(r.var) + r.begin * e.elemSize, e.partElems[i]});
        continue;
      }
      regions.push_back({buf, e.partElems[i]});
      const std::size_t first = inst->gathers.size();
      std::vector<VertexInstance::Move> runs;
      for (const auto &r : e.parts[i]) {
        runs.push_back({varData(r.var) + r.begin * e.elemSize, buf, r.size() * e.elemSize, 1, 0, 1, 0, 0});
        buf += r.size() * e.elemSize;
      }
      // (a written part keeps its runs in order: runs landing on the same bytes scatter in order)
      if (!e.write && runs.size() > 1) runs = foldInterleaved(runs);
      for (const auto &m : runs) {
        if (m.bufStride != 0) inst->gathers.push_back(m);
        else addMove(inst->gathers, first, m.var, m.buf, m.bytes);
      }
      foldRepeats(inst->gathers, first);
      if (e.write) inst->scatters.insert(inst->scatters.end(), inst->gathers.begin() + first, inst->gathers.end());
    }
    auto keep = e.desc->bind(inst->obj, regions.data(), regions.size());
    if (keep) inst->keep.push_back(std::move(keep));
  }
  for (const auto &s : vp.states) {
    auto keep = s.first->setState(inst->obj, s.second.data(), s.second.size());
    if (keep) inst->keep.push_back(std::move(keep));
  }
  return inst;
}

void gatherMove(const VertexInstance::Move &m) {
  const std::size_t bytes = m.bytes, count = m.count, block = bytes * count;
  if (m.bufStride != 0) { // one of interleaved views (see foldInterleaved)
    // (the strides in locals: the buffer's bytes could alias the move, which would be reread)
    const std::uint8_t *var = m.var;
    std::uint8_t *buf = m.buf;
    const std::ptrdiff_t stride = m.stride;
    const std::size_t bufStride = m.bufStride;
    if (bytes == 4)
      for (std::size_t k = 0; k < count; ++k, var += stride, buf += bufStride) std::memcpy(buf, var, 4);
    else
      for (std::size_t k = 0; k < count; ++k, var += stride, buf += bufStride) std::memcpy(buf, var, bytes);
    return;
  }
  if (count > 1 && m.stride == 0) { // one run repeated (a broadcast): copy it, then double it
    std::memcpy(m.buf, m.var, bytes);
    repeatPrefix(m.buf, bytes, block);
  } else {
    gatherRuns(m.buf, m.var, bytes, count, m.stride);
  }
  if (m.repeats == 1) return;
  if (m.repeatStride == 0) { // the same block again: double what is there
    repeatPrefix(m.buf, block, block * m.repeats);
    return;
  }
  const std::uint8_t *var = m.var;
  for (std::size_t r = 1; r < m.repeats; ++r) {
    var += m.repeatStride;
    gatherRuns(m.buf + r * block, var, bytes, count, m.stride);
  }
}

void scatterMove(const VertexInstance::Move &m) {
  const std::size_t block = m.bytes * m.count;
  // repeats landing on the same bytes: the last one stays
  const std::size_t from = m.repeatStride == 0 ? m.repeats - 1 : 0;
  std::uint8_t *var = m.var + std::ptrdiff_t(from) * m.repeatStride;
  for (std::size_t r = from; r < m.repeats; ++r, var += m.repeatStride)
    scatterRuns(var, m.buf + r * block, m.bytes, m.count, m.stride);
}

} // namespace poplar_host
