// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_SyncType_hpp
#define poplar_SyncType_hpp

namespace poplar {

enum class SyncType { INTERNAL, EXTERNAL, GLOBAL };

} // namespace poplar

#endif
