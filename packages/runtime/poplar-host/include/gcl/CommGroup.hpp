// poplar-host: a CPU emulation of the public GCL API.
#ifndef gcl_CommGroup_hpp
#define gcl_CommGroup_hpp

namespace gcl {

/// How replicas are grouped for a collective. With N replicas and group
/// size k (PopART's rule, which the emulation follows):
///   ALL          one group of all N replicas (the size is ignored);
///   CONSECUTIVE  N/k groups {0..k-1}, {k..2k-1}, ...;
///   ORTHOGONAL   N/k groups of k replicas spaced m = N/k apart:
///                {0, m, 2m, ...}, {1, m+1, ...}, ...
enum class CommGroupType { ALL, CONSECUTIVE, ORTHOGONAL };

struct CommGroup {
  CommGroup() = default;
  CommGroup(CommGroupType type, unsigned replicaGroupSize, unsigned replicaGroupStride = 1)
      : type(type), replicaGroupSize(replicaGroupSize), replicaGroupStride(replicaGroupStride) {}
  CommGroupType type = CommGroupType::ALL;
  /// 0 means all replicas.
  unsigned replicaGroupSize = 0;
  unsigned replicaGroupStride = 1;
};

} // namespace gcl

#endif
