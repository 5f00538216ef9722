// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_IPUModel_hpp
#define poplar_IPUModel_hpp

#include <poplar/Device.hpp>
#include <poplar/OptionFlags.hpp>

#include <string>

namespace poplar {

/// A simulated IPU of configurable size (used by the Poplar tutorials). The
/// emulation treats it like any other device.
struct IPUModel {
  explicit IPUModel(const char *ipuVersion = "ipu2");

  std::string IPUVersion;
  unsigned numIPUs = 1;
  unsigned tilesPerIPU = 1472;
  unsigned memoryPerTile = 638976;
  double tileClockFrequency = 1.33e9;
  bool compileIPUCode = false;

  Device createDevice(OptionFlags opts = {}, bool accurateHalf = false,
                      unsigned deviceManagerId = 0) const;
};

} // namespace poplar

#endif
