// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_Target_hpp
#define poplar_Target_hpp

#include <poplar/OptionFlags.hpp>
#include <poplar/StringRef.hpp>
#include <poplar/TargetType.hpp>
#include <poplar/Type.hpp>

#include <cstddef>
#include <string>

namespace poplar {

/// What the graph is compiled for. The emulated system is the Mk2 GC200:
/// 1472 tiles per IPU, 638,976 bytes per tile, 6 worker contexts per tile.
class Target {
public:
  Target() = default;

  static Target createIPUTarget(StringRef system, const OptionFlags &opts = {});
  static Target createIPUTarget(unsigned numIPUs, StringRef system, const OptionFlags &opts = {});
  static Target createIPUTarget(unsigned numIPUs, unsigned tilesPerIPU, StringRef system,
                                const OptionFlags &opts = {});
  static Target createCPUTarget(bool accurateHalf = false, unsigned numIPUs = 1);

  TargetType getTargetType() const { return type_; }
  std::string getTargetSystemString() const { return system_; }
  std::string getTargetArchString() const { return system_; }
  unsigned getNumIPUs() const { return numIPUs_; }
  unsigned getTilesPerIPU() const { return tilesPerIPU_; }
  unsigned getNumTiles() const { return numIPUs_ * tilesPerIPU_; }
  unsigned getNumWorkerContexts() const { return 6; }
  unsigned getBytesPerTile() const { return bytesPerTile_; }
  std::size_t getMemoryBytes() const { return std::size_t(bytesPerTile_) * getNumTiles(); }
  /// Cycles per second of a tile (the Mk2 IPU clock, 1.33 GHz; an option
  /// "clockFrequency" on createIPUTarget overrides it).
  double getTileClockFrequency() const { return clockHz_; }
  unsigned getDataPathWidth() const { return 64; }
  unsigned getAtomicStoreGranularity() const { return 4; }
  unsigned getExchangeBytesPerCycle() const { return 4; }
  unsigned getMemcpyBytesPerCycle() const { return 8; }
  unsigned getIpuLinkDomainSize() const { return 64; }
  unsigned getTypeSize(const Type &t) const { return static_cast<unsigned>(t.size()); }
  /// Elements of a type that fit the 64-bit data path (float 2, half 4).
  unsigned getVectorWidth(const Type &t) const { return 8 / getTypeSize(t); }
  unsigned getFloatVectorWidth() const { return 2; }
  unsigned getHalfVectorWidth() const { return 4; }
  /// A target for tiles [begin, end) of this one, with the same IPU size.
  Target createVirtualTarget(unsigned numIPUs, unsigned tilesPerIPU) const;

  std::size_t hash() const { return numIPUs_ * 1000003u + tilesPerIPU_; }
  friend bool operator==(const Target &a, const Target &b) {
    return a.numIPUs_ == b.numIPUs_ && a.tilesPerIPU_ == b.tilesPerIPU_ &&
           a.bytesPerTile_ == b.bytesPerTile_ && a.type_ == b.type_;
  }
  friend bool operator!=(const Target &a, const Target &b) { return !(a == b); }

  /// Emulation detail: used by the IPUModel and virtual graphs.
  static Target make(TargetType type, unsigned numIPUs, unsigned tilesPerIPU,
                     unsigned bytesPerTile, std::string system, double clockHz);

private:
  TargetType type_ = TargetType::IPU;
  unsigned numIPUs_ = 1;
  unsigned tilesPerIPU_ = 1472;
  unsigned bytesPerTile_ = 638976;
  std::string system_ = "ipu2";
  double clockHz_ = 1.33e9;
};

/// Host-side conversion between float and the device's IEEE half format
/// (round to nearest even).
void copyFloatToDeviceHalf(const Target &target, const float *src, void *dst, std::size_t numElements);
void copyDeviceHalfToFloat(const Target &target, const void *src, float *dst, std::size_t numElements);
void copyDoubleToDeviceHalf(const Target &target, const double *src, void *dst, std::size_t numElements);
void copyDeviceHalfToDouble(const Target &target, const void *src, double *dst, std::size_t numElements);

} // namespace poplar

#endif
