// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_VariableMappingMethod_hpp
#define poplar_VariableMappingMethod_hpp

namespace poplar {

/// NONE leaves the new variable unmapped; LINEAR spreads it over the tiles
/// like poputil::mapTensorLinearly.
enum class VariableMappingMethod { NONE, LINEAR };

} // namespace poplar

#endif
