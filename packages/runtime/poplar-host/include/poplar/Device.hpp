// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_Device_hpp
#define poplar_Device_hpp

#include <poplar/OptionFlags.hpp>
#include <poplar/Target.hpp>

#include <memory>

namespace poplar {

/// A device to load an Engine on. In the emulation every device is the CPU
/// pretending to be the IPUs of its target; attaching always succeeds.
class Device {
public:
  Device();
  ~Device();
  Device(const Device &);
  Device(Device &&) noexcept;
  Device &operator=(const Device &);
  Device &operator=(Device &&) noexcept;

  unsigned getId() const;
  const Target &getTarget() const;
  bool attach() const;
  bool isAttached() const;
  void detach() const;
  void reset() const {}
  bool supportsRemoteBuffers() const { return true; }
  Device createVirtualDevice(unsigned tilesPerIPU);

  static Device createCPUDevice(unsigned numIPUs = 1);
  static Device createSimulatorDevice(const Target &target, const OptionFlags &opts = {});

  /// Emulation detail.
  Device(unsigned id, Target target);

private:
  struct State;
  std::shared_ptr<State> state_;
};

} // namespace poplar

#endif
