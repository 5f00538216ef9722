// Shared by the kernel tests that compare PopLibs results with plain loops bit for bit: random
// operands, host-written inputs, and one engine run that checks every expected result.
#ifndef poplar_host_tests_bit_cases_hpp
#define poplar_host_tests_bit_cases_hpp

#include <poplar/Device.hpp>
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Target.hpp>
#include <poputil/TileMapping.hpp>

#include "check.hpp"

#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace bitcases {

/// The first IPU the device manager offers, attached.
inline poplar::Device attachedIpu() {
  auto devices = poplar::DeviceManager::createDeviceManager().getDevices(poplar::TargetType::IPU, 1);
  poplar::Device device = std::move(devices.front());
  CHECK(device.attach());
  return device;
}

inline std::vector<float> randomFloats(std::mt19937 &rng, std::size_t n) {
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(n);
  for (auto &x : v) x = d(rng);
  return v;
}

inline bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// A host-writable input mapped linearly.
inline poplar::Tensor input(poplar::Graph &graph, const poplar::Type &type, std::vector<std::size_t> shape, const std::string &name) {
  poplar::Tensor t = graph.addVariable(type, shape, name);
  poputil::mapTensorLinearly(graph, t);
  graph.createHostWrite(name + "-w", t);
  return t;
}

/// Operands written before one run, and results compared bit for bit after it.
class Cases {
public:
  explicit Cases(poplar::Graph &graph) : graph_(graph) {}

  /// An input holding `values` (float, or rounded to half).
  poplar::Tensor operand(const std::string &name, std::vector<std::size_t> shape, const std::vector<float> &values,
                         const poplar::Type &type = poplar::FLOAT) {
    poplar::Tensor t = input(graph_, type, shape, name);
    writes_.push_back([name, values, type](poplar::Engine &e) {
      if (type == poplar::FLOAT) return e.writeTensor(name + "-w", values.data(), values.data() + values.size());
      std::vector<std::uint16_t> h(values.size());
      poplar::copyFloatToDeviceHalf(poplar::Target::createIPUTarget(1, "ipu2"), values.data(), h.data(), h.size());
      e.writeTensor(name + "-w", h.data(), h.data() + h.size());
    });
    return t;
  }

  /// t (float) must hold exactly `values` after the run.
  void expect(const std::string &name, const poplar::Tensor &t, std::vector<float> values) {
    graph_.createHostRead(name, t);
    expected_.emplace_back(name, std::move(values));
  }

  /// Runs prog once and checks every expected result, naming the first differing element.
  void run(poplar::Device &device, const poplar::program::Sequence &prog) {
    poplar::Engine engine(graph_, prog);
    engine.load(device);
    for (auto &w : writes_) w(engine);
    engine.run(0);
    for (const auto &[name, want] : expected_) {
      std::vector<float> got(want.size());
      engine.readTensor(name, got.data(), got.data() + got.size());
      if (!sameBits(got, want)) {
        std::size_t i = 0;
        while (i < got.size() && std::memcmp(&got[i], &want[i], sizeof(float)) == 0) ++i;
        std::cout.precision(9);
        std::cout << name << ": element " << i << " is " << got[i] << ", expected " << want[i] << "\n";
      }
      CHECK(sameBits(got, want));
    }
  }

private:
  poplar::Graph &graph_;
  std::vector<std::function<void(poplar::Engine &)>> writes_;
  std::vector<std::pair<std::string, std::vector<float>>> expected_;
};

} // namespace bitcases

#endif
