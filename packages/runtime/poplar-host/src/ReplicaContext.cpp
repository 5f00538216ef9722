// ReplicaContext: how PopLibs steps computed on the host read and write one replica's device
// memory (see internal.hpp).
#include "internal.hpp"

#include <poplar/exceptions.hpp>

#include <cstring>

namespace poplar_host {

namespace {
/// varData asked once per variable in a row of regions (a transposed view has a region per
/// element, and varData is a call through a std::function).
class VarBytes {
public:
  explicit VarBytes(const ReplicaContext &ctx) : ctx_(ctx) {}
  std::uint8_t *operator()(unsigned var) {
    if (var == var_[0]) return base_[0];
    if (var == var_[1]) return base_[1];
    // two entries: a padded view alternates between its tensor and the padding's constant
    var_[1] = var_[0], base_[1] = base_[0];
    var_[0] = var, base_[0] = ctx_.varData(var);
    return base_[0];
  }

private:
  const ReplicaContext &ctx_;
  unsigned var_[2] = {~0u, ~0u};
  std::uint8_t *base_[2] = {nullptr, nullptr};
};
} // namespace

std::vector<std::uint8_t> ReplicaContext::readBytes(const poplar::Tensor &t) const {
  const auto &p = impl(t);
  const std::size_t es = p.type.size();
  std::vector<std::uint8_t> out(p.numElements * es);
  std::uint8_t *dst = out.data();
  VarBytes bytesOf(*this);
  for (const auto &r : p.regions) {
    std::memcpy(dst, bytesOf(r.var) + r.begin * es, r.size() * es);
    dst += r.size() * es;
  }
  return out;
}

void ReplicaContext::writeBytes(const poplar::Tensor &t, const std::uint8_t *src) const {
  const auto &p = impl(t);
  const std::size_t es = p.type.size();
  VarBytes bytesOf(*this);
  for (const auto &r : p.regions) {
    std::memcpy(bytesOf(r.var) + r.begin * es, src, r.size() * es);
    src += r.size() * es;
  }
}

std::vector<double> ReplicaContext::read(const poplar::Tensor &t) const {
  const auto &p = impl(t);
  std::vector<double> out(p.numElements);
  if (p.type.id() == poplar::Type::Id::FLOAT) { // straight from the variables, no byte copy
    double *dst = out.data();
    VarBytes bytesOf(*this);
  for (const auto &r : p.regions) {
      const std::uint8_t *src = bytesOf(r.var) + r.begin * sizeof(float);
      for (std::size_t i = 0; i < r.size(); ++i) {
        float f;
        std::memcpy(&f, src + i * sizeof(float), sizeof f);
        dst[i] = f;
      }
      dst += r.size();
    }
    return out;
  }
  const auto bytes = readBytes(t);
  const std::size_t es = p.type.size();
  for (std::size_t i = 0; i < p.numElements; ++i) out[i] = loadElement(p.type.id(), bytes.data() + i * es);
  return out;
}

void ReplicaContext::write(const poplar::Tensor &t, const std::vector<double> &values) const {
  const auto &p = impl(t);
  if (values.size() != p.numElements)
    throw poplar::poplar_error(message("internal error: ", values.size(), " values for a tensor of ",
                                       p.numElements, " elements"));
  const std::size_t es = p.type.size();
  std::vector<std::uint8_t> bytes(p.numElements * es);
  const auto id = p.type.id();
  Rounder r;
  if ((id == poplar::Type::Id::HALF || id == poplar::Type::Id::FLOAT) && p.numElements > 0) r = rounder(t);
  if (r.mode.ieee() && id == poplar::Type::Id::FLOAT) {
    for (std::size_t i = 0; i < p.numElements; ++i) {
      const float f = static_cast<float>(values[i]);
      std::memcpy(bytes.data() + i * sizeof f, &f, sizeof f);
    }
  } else if (r.mode.ieee()) {
    for (std::size_t i = 0; i < p.numElements; ++i) storeElement(id, bytes.data() + i * es, values[i]);
  } else if (id == poplar::Type::Id::HALF) {
    for (std::size_t i = 0; i < p.numElements; ++i) {
      const std::uint16_t h = roundToHalfBits(values[i], r.mode, r.draw(i, kFinalRounding), r.flags);
      std::memcpy(bytes.data() + i * es, &h, 2);
    }
  } else {
    for (std::size_t i = 0; i < p.numElements; ++i) {
      const float f = roundToFloat(values[i], r.flags);
      std::memcpy(bytes.data() + i * es, &f, 4);
    }
  }
  raised(r);
  writeBytes(t, bytes.data());
}

unsigned ReplicaContext::tileOf(const poplar::Tensor &t) const {
  const auto &p = impl(t);
  if (p.regions.empty()) return 0;
  const auto &v = p.graph->vars[p.regions[0].var];
  if (p.regions[0].begin >= v.tile.size()) return 0;
  const std::int32_t tile = v.tile[p.regions[0].begin];
  return tile < 0 || static_cast<std::size_t>(tile) >= numTiles ? 0u : static_cast<unsigned>(tile);
}

Rounder ReplicaContext::rounder(const poplar::Tensor &out) const {
  Rounder r;
  if (fpModes == nullptr) return r;
  r.tile = tileOf(out);
  r.mode = fpModes[r.tile];
  roundedTile = static_cast<int>(r.tile);
  r.key = mix64(hwSeeds[r.tile] ^ stepKey);
  return r;
}

void ReplicaContext::readFloats(const poplar::Tensor &t, float *dst) const {
  const auto &p = impl(t);
  const auto id = p.type.id();
  if (id != poplar::Type::Id::FLOAT && id != poplar::Type::Id::HALF) {
    const auto d = read(t);
    std::copy(d.begin(), d.end(), dst);
    return;
  }
  VarBytes bytesOf(*this);
  for (const auto &r : p.regions) {
    if (id == poplar::Type::Id::FLOAT) {
      const std::uint8_t *src = bytesOf(r.var) + r.begin * sizeof(float);
      if (r.size() == 1) std::memcpy(dst, src, sizeof(float)); // a transposed view's elements: no call
      else std::memcpy(dst, src, r.size() * sizeof(float));
    } else {
      const std::uint8_t *src = bytesOf(r.var) + r.begin * 2;
      for (std::size_t i = 0; i < r.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = halfBitsToFloat(h);
      }
    }
    dst += r.size();
  }
}

float *ReplicaContext::contiguousFloats(const poplar::Tensor &t) const {
  const auto &p = impl(t);
  if (p.type != poplar::FLOAT || p.regions.size() != 1) return nullptr;
  return reinterpret_cast<float *>(varData(p.regions[0].var) + p.regions[0].begin * sizeof(float));
}

bool ReplicaContext::floatRows(const poplar::Tensor &t, std::size_t rowLength, std::vector<const float *> &rows) const {
  const auto &p = impl(t);
  rows.clear();
  if (p.type != poplar::FLOAT || rowLength == 0) return false;
  VarBytes bytesOf(*this);
  for (const auto &r : p.regions) {
    if (r.size() % rowLength != 0) return false;
    const float *base = reinterpret_cast<const float *>(bytesOf(r.var) + r.begin * sizeof(float));
    for (std::size_t i = 0; i < r.size(); i += rowLength) rows.push_back(base + i);
  }
  return true;
}

void ReplicaContext::writeFloats(const poplar::Tensor &t, const float *v) const {
  const auto &p = impl(t);
  if (p.type != poplar::FLOAT) return write(t, std::vector<double>(v, v + p.numElements));
  VarBytes bytesOf(*this);
  for (const auto &r : p.regions) {
    std::memcpy(bytesOf(r.var) + r.begin * sizeof(float), v, r.size() * sizeof(float));
    v += r.size();
  }
}

} // namespace poplar_host
