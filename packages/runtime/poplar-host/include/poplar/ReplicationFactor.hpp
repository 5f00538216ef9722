// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_ReplicationFactor_hpp
#define poplar_ReplicationFactor_hpp

namespace poplar {

/// How many copies of a graph run side by side, one per group of IPUs.
struct replication_factor {
  explicit replication_factor(unsigned r) : value(r) {}
  unsigned value;
};

} // namespace poplar

#endif
