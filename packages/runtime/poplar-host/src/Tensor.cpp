// Tensor views. Every view is flattened to a list of variable regions when it
// is made: slices, shuffles, broadcasts, sub-samples and reversals are affine
// maps over the parent's element order, and concat splices region lists.
#include "internal.hpp"

#include <poplar/exceptions.hpp>

#include <algorithm>
#include <iostream>
#include <numeric>

namespace poplar_host {

const TensorImpl &impl(const poplar::Tensor &t, const char *what) {
  if (!t.getImpl()) throw poplar::poplar_error(message("invalid (default-constructed) ", what, " used"));
  return *t.getImpl();
}

std::size_t product(const std::vector<std::size_t> &shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shapeString(const std::vector<std::size_t> &shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

poplar::Tensor makeTensor(GraphState *graph, poplar::Type type, std::vector<std::size_t> shape,
                          std::vector<Region> regions) {
  auto t = std::make_shared<TensorImpl>();
  t->graph = graph;
  t->type = type;
  t->numElements = product(shape);
  t->shape = std::move(shape);
  t->regions = std::move(regions);
  t->starts.reserve(t->regions.size());
  std::size_t at = 0;
  for (const auto &r : t->regions) {
    t->starts.push_back(at);
    at += r.size();
  }
  if (at != t->numElements)
    throw poplar::poplar_error(message("internal error: tensor of shape ", shapeString(t->shape), " has ", at,
                                       " elements in its regions"));
  return poplar::Tensor(std::move(t));
}

namespace {

/// Maps ranges of a parent tensor's element indices to variable regions,
/// remembering where the last lookup ended (views mostly walk forwards).
class RegionMapper {
public:
  explicit RegionMapper(const TensorImpl &p) : p_(p) {}
  void map(std::size_t a, std::size_t len, std::vector<Region> &out) {
    if (len == 0) return;
    if (!(cur_ < p_.regions.size() && p_.starts[cur_] <= a && a < p_.starts[cur_] + p_.regions[cur_].size())) {
      auto it = std::upper_bound(p_.starts.begin(), p_.starts.end(), a);
      cur_ = static_cast<std::size_t>(it - p_.starts.begin()) - 1;
    }
    while (len > 0) {
      const Region &r = p_.regions[cur_];
      const std::size_t off = a - p_.starts[cur_];
      const std::size_t take = std::min(len, r.size() - off);
      appendRegion(out, r.var, r.begin + off, r.begin + off + take);
      a += take;
      len -= take;
      if (len > 0) ++cur_;
    }
  }

private:
  const TensorImpl &p_;
  std::size_t cur_ = 0;
};

std::vector<long long> rowMajorStrides(const std::vector<std::size_t> &shape) {
  std::vector<long long> s(shape.size());
  long long acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= static_cast<long long>(shape[i]);
  }
  return s;
}

/// The view whose element at multi-index i is parent element
/// offset + sum(i[d] * strides[d]).
poplar::Tensor affineView(const TensorImpl &p, const std::vector<std::size_t> &shape, long long offset,
                          const std::vector<long long> &strides) {
  std::vector<Region> out;
  const std::size_t n = product(shape);
  if (n > 0) {
    RegionMapper mapper(p);
    if (shape.empty()) {
      mapper.map(static_cast<std::size_t>(offset), 1, out);
    } else {
      const std::size_t rank = shape.size();
      const std::size_t inner = shape.back();
      const long long innerStride = strides.back();
      std::vector<std::size_t> idx(rank - 1, 0);
      const std::size_t outer = n / inner;
      for (std::size_t o = 0; o < outer; ++o) {
        long long base = offset;
        for (std::size_t d = 0; d + 1 < rank; ++d) base += static_cast<long long>(idx[d]) * strides[d];
        if (innerStride == 1) {
          mapper.map(static_cast<std::size_t>(base), inner, out);
        } else {
          for (std::size_t j = 0; j < inner; ++j)
            mapper.map(static_cast<std::size_t>(base + static_cast<long long>(j) * innerStride), 1, out);
        }
        for (std::size_t d = rank - 1; d-- > 0;) {
          if (++idx[d] < shape[d]) break;
          idx[d] = 0;
        }
      }
    }
  }
  return makeTensor(p.graph, p.type, shape, std::move(out));
}

poplar::Tensor reshaped(const TensorImpl &p, std::vector<std::size_t> shape) {
  return makeTensor(p.graph, p.type, std::move(shape), p.regions);
}

void checkDim(const TensorImpl &p, unsigned dim, const char *op) {
  if (dim >= p.shape.size())
    throw poplar::index_error(message(op, ": dimension ", dim, " out of range for a tensor of shape ",
                                      shapeString(p.shape)));
}

} // namespace
} // namespace poplar_host

namespace poplar {

using namespace poplar_host;

Tensor::Tensor() = default;
Tensor::~Tensor() = default;
Tensor::Tensor(const Tensor &) = default;
Tensor::Tensor(Tensor &&) noexcept = default;
Tensor &Tensor::operator=(const Tensor &) = default;
Tensor &Tensor::operator=(Tensor &&) noexcept = default;
Tensor::Tensor(std::shared_ptr<const TensorImpl> impl) : impl_(std::move(impl)) {}

Type Tensor::elementType() const { return impl(*this).type; }
std::size_t Tensor::numElements() const { return impl(*this).numElements; }
std::vector<std::size_t> Tensor::shape() const { return impl(*this).shape; }
unsigned Tensor::rank() const { return static_cast<unsigned>(impl(*this).shape.size()); }
std::size_t Tensor::dim(unsigned i) const {
  const auto &p = impl(*this);
  checkDim(p, i, "Tensor::dim");
  return p.shape[i];
}

Tensor Tensor::slice(std::size_t begin, std::size_t end, unsigned dim) const {
  const auto &p = impl(*this);
  checkDim(p, dim, "Tensor::slice");
  if (begin > end || end > p.shape[dim])
    throw index_error(message("Tensor::slice: [", begin, ", ", end, ") is out of range for dimension ", dim,
                              " of a tensor of shape ", shapeString(p.shape)));
  auto strides = rowMajorStrides(p.shape);
  auto shape = p.shape;
  shape[dim] = end - begin;
  return affineView(p, shape, static_cast<long long>(begin) * strides[dim], strides);
}

Tensor Tensor::slice(ArrayRef<std::size_t> begin, ArrayRef<std::size_t> end) const {
  const auto &p = impl(*this);
  if (begin.size() != p.shape.size() || end.size() != p.shape.size())
    throw index_error(message("Tensor::slice: expected ", p.shape.size(), " begin and end indices for shape ",
                              shapeString(p.shape)));
  auto strides = rowMajorStrides(p.shape);
  auto shape = p.shape;
  long long offset = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (begin[d] > end[d] || end[d] > p.shape[d])
      throw index_error(message("Tensor::slice: [", begin[d], ", ", end[d], ") is out of range for dimension ", d,
                                " of a tensor of shape ", shapeString(p.shape)));
    shape[d] = end[d] - begin[d];
    offset += static_cast<long long>(begin[d]) * strides[d];
  }
  return affineView(p, shape, offset, strides);
}

std::vector<Tensor> Tensor::slices(ArrayRef<Interval> intervals, unsigned dim) const {
  std::vector<Tensor> out;
  for (const auto &i : intervals) out.push_back(slice(i.begin(), i.end(), dim));
  return out;
}

std::vector<Tensor> Tensor::slices(const std::vector<std::vector<Interval>> &intervals, unsigned dim) const {
  std::vector<Tensor> out;
  for (const auto &seq : intervals) {
    std::vector<Tensor> parts;
    for (const auto &i : seq) parts.push_back(slice(i.begin(), i.end(), dim));
    out.push_back(concat(parts, dim));
  }
  return out;
}

std::vector<Tensor> Tensor::slices(const ArrayRef<unsigned> &indices, unsigned dim) const {
  std::vector<Tensor> out;
  for (auto i : indices) out.push_back(slice(i, i + 1, dim));
  return out;
}

Tensor Tensor::index(ArrayRef<std::size_t> indices) const {
  const auto &p = impl(*this);
  if (indices.size() > p.shape.size())
    throw index_error(message("Tensor::index: ", indices.size(), " indices for a tensor of shape ",
                              shapeString(p.shape)));
  Tensor t = *this;
  for (std::size_t d = 0; d < indices.size(); ++d) {
    if (indices[d] >= p.shape[d])
      throw index_error(message("Tensor::index: index ", indices[d], " out of range for dimension ", d,
                                " of a tensor of shape ", shapeString(p.shape)));
    t = t.slice(indices[d], indices[d] + 1, static_cast<unsigned>(d));
  }
  std::vector<std::size_t> shape(p.shape.begin() + static_cast<long>(indices.size()), p.shape.end());
  return reshaped(impl(t), shape);
}

Tensor Tensor::operator[](std::size_t i) const { return index({i}); }

Tensor Tensor::flatten() const {
  const auto &p = impl(*this);
  return reshaped(p, {p.numElements});
}

Tensor Tensor::flatten(unsigned dimBegin, unsigned dimEnd) const {
  const auto &p = impl(*this);
  if (dimBegin >= dimEnd || dimEnd > p.shape.size())
    throw index_error(message("Tensor::flatten: bad dimension range [", dimBegin, ", ", dimEnd, ") for shape ",
                              shapeString(p.shape)));
  std::vector<std::size_t> shape(p.shape.begin(), p.shape.begin() + dimBegin);
  std::size_t merged = 1;
  for (unsigned d = dimBegin; d < dimEnd; ++d) merged *= p.shape[d];
  shape.push_back(merged);
  shape.insert(shape.end(), p.shape.begin() + dimEnd, p.shape.end());
  return reshaped(p, shape);
}

Tensor Tensor::reshape(ArrayRef<std::size_t> shape) const {
  const auto &p = impl(*this);
  std::vector<std::size_t> s = shape.vec();
  if (product(s) != p.numElements)
    throw poplar_error(message("Tensor::reshape: cannot reshape a tensor of shape ", shapeString(p.shape), " to ",
                               shapeString(s)));
  return reshaped(p, s);
}

Tensor Tensor::reshapePartial(unsigned beginIndex, unsigned endIndex, ArrayRef<std::size_t> newDims) const {
  const auto &p = impl(*this);
  if (beginIndex > endIndex || endIndex > p.shape.size())
    throw index_error(message("Tensor::reshapePartial: bad dimension range [", beginIndex, ", ", endIndex,
                              ") for shape ", shapeString(p.shape)));
  std::vector<std::size_t> s(p.shape.begin(), p.shape.begin() + beginIndex);
  s.insert(s.end(), newDims.begin(), newDims.end());
  s.insert(s.end(), p.shape.begin() + endIndex, p.shape.end());
  return reshape(s);
}

Tensor Tensor::dimShuffle(ArrayRef<unsigned> permutation) const {
  const auto &p = impl(*this);
  const std::size_t rank = p.shape.size();
  std::vector<bool> seen(rank, false);
  bool ok = permutation.size() == rank;
  for (std::size_t i = 0; ok && i < permutation.size(); ++i) {
    if (permutation[i] >= rank || seen[permutation[i]]) ok = false;
    else seen[permutation[i]] = true;
  }
  if (!ok) {
    std::string perm;
    for (auto v : permutation) perm += (perm.empty() ? "" : ",") + std::to_string(v);
    throw poplar_error(message("Tensor::dimShuffle: [", perm, "] is not a permutation of the dimensions of shape ",
                               shapeString(p.shape)));
  }
  auto pstrides = rowMajorStrides(p.shape);
  std::vector<std::size_t> shape(rank);
  std::vector<long long> strides(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    shape[i] = p.shape[permutation[i]];
    strides[i] = pstrides[permutation[i]];
  }
  return affineView(p, shape, 0, strides);
}

Tensor Tensor::dimShufflePartial(ArrayRef<unsigned> source, ArrayRef<unsigned> destination) const {
  const auto &p = impl(*this);
  const unsigned rank = static_cast<unsigned>(p.shape.size());
  if (source.size() != destination.size())
    throw poplar_error("Tensor::dimShufflePartial: source and destination differ in length");
  std::vector<int> perm(rank, -1);
  std::vector<bool> used(rank, false);
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] >= rank || destination[i] >= rank || perm[destination[i]] != -1 || used[source[i]])
      throw poplar_error(message("Tensor::dimShufflePartial: bad dimensions for shape ", shapeString(p.shape)));
    perm[destination[i]] = static_cast<int>(source[i]);
    used[source[i]] = true;
  }
  unsigned next = 0;
  for (unsigned d = 0; d < rank; ++d) {
    if (perm[d] != -1) continue;
    while (used[next]) ++next;
    perm[d] = static_cast<int>(next);
    used[next] = true;
  }
  std::vector<unsigned> permutation(perm.begin(), perm.end());
  return dimShuffle(permutation);
}

Tensor Tensor::dimRoll(unsigned dimIdx, unsigned newIdx) const { return dimShufflePartial({dimIdx}, {newIdx}); }

Tensor Tensor::expand(ArrayRef<std::size_t> indices) const {
  const auto &p = impl(*this);
  std::vector<std::size_t> shape;
  std::size_t k = 0;
  for (std::size_t d = 0; d <= p.shape.size(); ++d) {
    while (k < indices.size() && indices[k] == d) {
      shape.push_back(1);
      ++k;
    }
    if (d < p.shape.size()) shape.push_back(p.shape[d]);
  }
  if (k != indices.size())
    throw poplar_error(message("Tensor::expand: indices must be ascending and at most the rank (shape ",
                               shapeString(p.shape), ")"));
  return reshaped(p, shape);
}

Tensor Tensor::squeeze(ArrayRef<std::size_t> indices) const {
  const auto &p = impl(*this);
  std::vector<bool> drop(p.shape.size(), false);
  for (auto i : indices) {
    if (i >= p.shape.size() || p.shape[i] != 1)
      throw poplar_error(message("Tensor::squeeze: dimension ", i, " of shape ", shapeString(p.shape),
                                 " is not a singleton"));
    drop[i] = true;
  }
  std::vector<std::size_t> shape;
  for (std::size_t d = 0; d < p.shape.size(); ++d)
    if (!drop[d]) shape.push_back(p.shape[d]);
  return reshaped(p, shape);
}

Tensor Tensor::transpose() const {
  const auto &p = impl(*this);
  if (p.shape.size() != 2)
    throw poplar_error(message("Tensor::transpose: needs a 2-D tensor, got shape ", shapeString(p.shape)));
  return dimShuffle({1, 0});
}

Tensor Tensor::subSample(unsigned stride, unsigned dim) const {
  const auto &p = impl(*this);
  checkDim(p, dim, "Tensor::subSample");
  if (stride == 0) throw poplar_error("Tensor::subSample: stride must be positive");
  auto strides = rowMajorStrides(p.shape);
  auto shape = p.shape;
  shape[dim] = (p.shape[dim] + stride - 1) / stride;
  strides[dim] *= stride;
  return affineView(p, shape, 0, strides);
}

Tensor Tensor::upsample(unsigned scale, unsigned dim, UpsampleMethod) const {
  const auto &p = impl(*this);
  checkDim(p, dim, "Tensor::upsample");
  if (scale == 0) throw poplar_error("Tensor::upsample: scale must be positive");
  // [.., s, ..] -> [.., s, scale, ..] with a zero stride, then merge.
  auto pstrides = rowMajorStrides(p.shape);
  std::vector<std::size_t> shape(p.shape);
  std::vector<long long> strides(pstrides);
  shape.insert(shape.begin() + dim + 1, scale);
  strides.insert(strides.begin() + dim + 1, 0);
  return affineView(p, shape, 0, strides).flatten(dim, dim + 2);
}

Tensor Tensor::broadcast(unsigned N, unsigned dim) const {
  const auto &p = impl(*this);
  checkDim(p, dim, "Tensor::broadcast");
  // [.., s, ..] -> [.., N, s, ..] with a zero stride, then merge: the whole
  // tensor repeated N times along dim.
  auto pstrides = rowMajorStrides(p.shape);
  std::vector<std::size_t> shape(p.shape);
  std::vector<long long> strides(pstrides);
  shape.insert(shape.begin() + dim, N);
  strides.insert(strides.begin() + dim, 0);
  return affineView(p, shape, 0, strides).flatten(dim, dim + 2);
}

Tensor Tensor::reverse(unsigned dim) const {
  const auto &p = impl(*this);
  checkDim(p, dim, "Tensor::reverse");
  auto strides = rowMajorStrides(p.shape);
  long long offset = p.shape[dim] == 0 ? 0 : static_cast<long long>(p.shape[dim] - 1) * strides[dim];
  strides[dim] = -strides[dim];
  return affineView(p, p.shape, offset, strides);
}

Tensor Tensor::reinterpret(const Type &type) const {
  const auto &p = impl(*this);
  if (type.size() != p.type.size())
    throw type_error(message("Tensor::reinterpret: ", p.type, " and ", type, " differ in size"));
  return makeTensor(p.graph, type, p.shape, p.regions);
}

bool Tensor::isContiguous() const { return impl(*this).regions.size() <= 1; }

namespace {
std::vector<Region> sortedRegions(const TensorImpl &p) {
  auto rs = p.regions;
  std::sort(rs.begin(), rs.end(), [](const Region &a, const Region &b) {
    return a.var != b.var ? a.var < b.var : a.begin < b.begin;
  });
  return rs;
}
} // namespace

bool Tensor::containsAliases() const {
  auto rs = sortedRegions(impl(*this));
  for (std::size_t i = 1; i < rs.size(); ++i)
    if (rs[i].var == rs[i - 1].var && rs[i].begin < rs[i - 1].end) return true;
  return false;
}

bool Tensor::containsConstant() const {
  const auto &p = impl(*this);
  for (const auto &r : p.regions)
    if (p.graph->vars[r.var].isConstant) return true;
  return false;
}

bool Tensor::isParallelWriteable() const { return !containsAliases() && !containsConstant(); }

bool Tensor::intersectsWith(const Tensor &other) const {
  auto a = sortedRegions(impl(*this));
  auto b = sortedRegions(impl(other));
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].var != b[j].var) {
      (a[i].var < b[j].var ? i : j)++;
      continue;
    }
    if (a[i].begin < b[j].end && b[j].begin < a[i].end) return true;
    (a[i].end < b[j].end ? i : j)++;
  }
  return false;
}

std::vector<Interval> Tensor::getContiguousRegions() const {
  const auto &p = impl(*this);
  std::vector<Interval> out;
  for (std::size_t i = 0; i < p.regions.size(); ++i) out.emplace_back(p.starts[i], p.starts[i] + p.regions[i].size());
  return out;
}

std::string Tensor::shapeToString() const { return shapeString(impl(*this).shape); }

std::string Tensor::getDebugStr() const {
  const auto &p = impl(*this);
  std::string s = p.type.toString() + shapeString(p.shape) + " of";
  std::vector<unsigned> vars;
  for (const auto &r : p.regions)
    if (std::find(vars.begin(), vars.end(), r.var) == vars.end()) vars.push_back(r.var);
  for (std::size_t i = 0; i < vars.size() && i < 8; ++i) s += " '" + p.graph->vars[vars[i]].name + "'";
  if (vars.size() > 8) s += " ...";
  return s;
}

void Tensor::dump() const { std::cout << getDebugStr() << '\n'; }

std::ostream &operator<<(std::ostream &os, const Tensor &t) {
  return os << (t.valid() ? t.getDebugStr() : std::string("<invalid tensor>"));
}

Tensor concat(ArrayRef<Tensor> ts, unsigned dim) {
  if (ts.empty()) throw poplar_error("concat: no tensors to join");
  const auto &first = impl(ts[0]);
  checkDim(first, dim, "concat");
  auto shape = first.shape;
  shape[dim] = 0;
  for (const auto &t : ts) {
    const auto &p = impl(t);
    bool ok = p.type == first.type && p.shape.size() == first.shape.size() && p.graph == first.graph;
    for (std::size_t d = 0; ok && d < p.shape.size(); ++d)
      if (d != dim && p.shape[d] != first.shape[d]) ok = false;
    if (!ok)
      throw poplar_error(message("concat along dimension ", dim, ": ", p.type, shapeString(p.shape),
                                 " does not match ", first.type, shapeString(first.shape)));
    shape[dim] += p.shape[dim];
  }
  std::size_t outer = 1, inner = 1;
  for (unsigned d = 0; d < dim; ++d) outer *= first.shape[d];
  for (std::size_t d = dim + 1; d < first.shape.size(); ++d) inner *= first.shape[d];
  std::vector<RegionMapper> mappers;
  mappers.reserve(ts.size());
  for (const auto &t : ts) mappers.emplace_back(impl(t));
  std::vector<Region> out;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const std::size_t block = impl(ts[i]).shape[dim] * inner;
      mappers[i].map(o * block, block, out);
    }
  return makeTensor(first.graph, first.type, shape, std::move(out));
}

Tensor concat(const Tensor &first, const Tensor &second, unsigned dim) { return concat({first, second}, dim); }

Tensor append(const Tensor &t, const Tensor &s, unsigned dim) { return concat({t, s.expand({dim})}, dim); }

} // namespace poplar
