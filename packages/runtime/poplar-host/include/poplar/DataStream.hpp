// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_DataStream_hpp
#define poplar_DataStream_hpp

#include <poplar/Type.hpp>

#include <cstddef>
#include <string>

namespace poplar {

enum class DataStreamType { HostToDeviceFIFO, DeviceToHostFIFO, HostToDeviceBuffer, DeviceToHostBuffer };

/// For a host-to-device stream of a replicated graph: REPLICATE gives each
/// replica its own data (the host buffer holds replicas x elements per copy),
/// BROADCAST sends the same data to all replicas.
enum class ReplicatedStreamMode { REPLICATE, BROADCAST };

/// A FIFO between the host and the device, created by Graph.
class DataStream {
public:
  DataStream() = default;
  std::string handle() const { return handle_; }
  std::size_t numElements() const { return numElements_; }
  unsigned replicationFactor() const { return replicationFactor_; }
  ReplicatedStreamMode replicatedMode() const { return mode_; }
  DataStreamType type() const { return type_; }
  Type elementType() const { return elementType_; }

  /// Emulation detail.
  DataStream(unsigned id, std::string handle, Type t, std::size_t n, DataStreamType type,
             ReplicatedStreamMode mode, unsigned replicationFactor)
      : id_(id), handle_(std::move(handle)), elementType_(t), numElements_(n), type_(type),
        mode_(mode), replicationFactor_(replicationFactor) {}
  unsigned getId() const { return id_; }

private:
  unsigned id_ = ~0u;
  std::string handle_;
  Type elementType_;
  std::size_t numElements_ = 0;
  DataStreamType type_ = DataStreamType::HostToDeviceFIFO;
  ReplicatedStreamMode mode_ = ReplicatedStreamMode::REPLICATE;
  unsigned replicationFactor_ = 1;
};

} // namespace poplar

#endif
