// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_DeviceManager_hpp
#define poplar_DeviceManager_hpp

#include <poplar/Device.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/TargetType.hpp>

#include <vector>

namespace poplar {

/// Lists devices. The emulation offers, for any number of IPUs asked for, one
/// emulated GC200 device set of that many IPUs.
class DeviceManager {
public:
  DeviceManager() = default;
  static DeviceManager createDeviceManager() { return DeviceManager(); }
  std::size_t getNumDevices() const { return 1; }
  std::vector<Device> getDevices(TargetType type, unsigned requiredNumIPUs,
                                 const OptionFlags &opts = {}) const;
  std::vector<Device> getDevices() const;
  Device getDevice(unsigned deviceManagerId, const OptionFlags &opts = {}) const;
  std::vector<unsigned> getChildDeviceIds(unsigned parentId, unsigned numIPUs = 1) const;
};

} // namespace poplar

#endif
