// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_TargetType_hpp
#define poplar_TargetType_hpp

namespace poplar {

enum class TargetType { IPU, IPU_MODEL, CPU };

} // namespace poplar

#endif
