// Targets and devices: the CPU stands in for any number of Mk2 IPUs.
#include "internal.hpp"

#include <poplar/Device.hpp>
#include <poplar/DeviceManager.hpp>
#include <poplar/HalfFloat.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/exceptions.hpp>

#include <cstring>

namespace poplar {

namespace {
void checkSystem(const std::string &system) {
  // ipu2 is the GC200 the emulation models; ipu21 (Bow / C600) has the same tiles.
  if (system != "ipu2" && system != "ipu21" && system != "ipu1")
    throw invalid_machine_model("Unknown IPU system type '" + system + "' (expected ipu2)");
}
double clockFrom(const OptionFlags &opts, double dflt) {
  auto v = opts.get("clockFrequency", "");
  return v.empty() ? dflt : std::stod(v);
}
} // namespace

Target Target::make(TargetType type, unsigned numIPUs, unsigned tilesPerIPU, unsigned bytesPerTile,
                    std::string system, double clockHz) {
  if (numIPUs == 0 || tilesPerIPU == 0) throw invalid_machine_model("a target needs at least one IPU and one tile");
  Target t;
  t.type_ = type;
  t.numIPUs_ = numIPUs;
  t.tilesPerIPU_ = tilesPerIPU;
  t.bytesPerTile_ = bytesPerTile;
  t.system_ = std::move(system);
  t.clockHz_ = clockHz;
  return t;
}

Target Target::createIPUTarget(StringRef system, const OptionFlags &opts) {
  return createIPUTarget(1, system, opts);
}

Target Target::createIPUTarget(unsigned numIPUs, StringRef system, const OptionFlags &opts) {
  checkSystem(system.str());
  return make(TargetType::IPU, numIPUs, 1472, 638976, system.str(), clockFrom(opts, 1.33e9));
}

Target Target::createIPUTarget(unsigned numIPUs, unsigned tilesPerIPU, StringRef system, const OptionFlags &opts) {
  checkSystem(system.str());
  return make(TargetType::IPU, numIPUs, tilesPerIPU, 638976, system.str(), clockFrom(opts, 1.33e9));
}

Target Target::createCPUTarget(bool, unsigned numIPUs) {
  return make(TargetType::CPU, numIPUs, 1, 638976, "cpu", 1.33e9);
}

Target Target::createVirtualTarget(unsigned numIPUs, unsigned tilesPerIPU) const {
  return make(type_, numIPUs, tilesPerIPU, bytesPerTile_, system_, clockHz_);
}

void copyFloatToDeviceHalf(const Target &, const float *src, void *dst, std::size_t n) {
  auto *out = static_cast<std::uint8_t *>(dst);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = poplar_host::floatToHalfBits(src[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void copyDeviceHalfToFloat(const Target &, const void *src, float *dst, std::size_t n) {
  const auto *in = static_cast<const std::uint8_t *>(src);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    dst[i] = poplar_host::halfBitsToFloat(h);
  }
}

void copyDoubleToDeviceHalf(const Target &, const double *src, void *dst, std::size_t n) {
  auto *out = static_cast<std::uint8_t *>(dst);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = poplar_host::doubleToHalfBits(src[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void copyDeviceHalfToDouble(const Target &, const void *src, double *dst, std::size_t n) {
  const auto *in = static_cast<const std::uint8_t *>(src);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    dst[i] = poplar_host::halfBitsToFloat(h);
  }
}

// --- Device ------------------------------------------------------------------

struct Device::State {
  unsigned id = 0;
  Target target;
  bool attached = false;
};

Device::Device() : state_(std::make_shared<State>()) {}
Device::Device(unsigned id, Target target) : state_(std::make_shared<State>()) {
  state_->id = id;
  state_->target = std::move(target);
}
Device::~Device() = default;
Device::Device(const Device &) = default;
Device::Device(Device &&) noexcept = default;
Device &Device::operator=(const Device &) = default;
Device &Device::operator=(Device &&) noexcept = default;

unsigned Device::getId() const { return state_->id; }
const Target &Device::getTarget() const { return state_->target; }
bool Device::attach() const {
  state_->attached = true;
  return true;
}
bool Device::isAttached() const { return state_->attached; }
void Device::detach() const { state_->attached = false; }
Device Device::createVirtualDevice(unsigned tilesPerIPU) {
  return Device(state_->id, state_->target.createVirtualTarget(state_->target.getNumIPUs(), tilesPerIPU));
}
Device Device::createCPUDevice(unsigned numIPUs) { return Device(0, Target::createCPUTarget(false, numIPUs)); }
Device Device::createSimulatorDevice(const Target &target, const OptionFlags &) { return Device(0, target); }

// --- DeviceManager -------------------------------------------------------------

std::vector<Device> DeviceManager::getDevices(TargetType type, unsigned requiredNumIPUs, const OptionFlags &) const {
  if (requiredNumIPUs == 0) return {};
  if (type == TargetType::CPU) return {Device::createCPUDevice(requiredNumIPUs)};
  // One emulated device set of exactly the requested size (ids as on a
  // Graphcore system: multi-IPU devices come after the single ones).
  return {Device(requiredNumIPUs == 1 ? 0 : 64 + requiredNumIPUs, Target::createIPUTarget(requiredNumIPUs, "ipu2"))};
}

std::vector<Device> DeviceManager::getDevices() const { return getDevices(TargetType::IPU, 1); }

Device DeviceManager::getDevice(unsigned deviceManagerId, const OptionFlags &) const {
  // the ids getDevices hands out: below 64 single IPUs, 64 + n a device of n IPUs
  const unsigned numIPUs = deviceManagerId > 64 ? deviceManagerId - 64 : 1;
  return Device(deviceManagerId, Target::createIPUTarget(numIPUs, "ipu2"));
}

std::vector<unsigned> DeviceManager::getChildDeviceIds(unsigned parentId, unsigned) const { return {parentId}; }

// --- IPUModel --------------------------------------------------------------------

IPUModel::IPUModel(const char *ipuVersion) : IPUVersion(ipuVersion ? ipuVersion : "ipu2") {
  checkSystem(IPUVersion);
}

Device IPUModel::createDevice(OptionFlags, bool, unsigned deviceManagerId) const {
  return Device(deviceManagerId, Target::make(TargetType::IPU_MODEL, numIPUs, tilesPerIPU, memoryPerTile, IPUVersion,
                                              tileClockFrequency));
}

} // namespace poplar
