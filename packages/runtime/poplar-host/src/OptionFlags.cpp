// poplar::OptionFlags' special members (see OptionFlags.hpp).
#include <poplar/OptionFlags.hpp>

namespace poplar {

OptionFlags::OptionFlags() = default;
OptionFlags::OptionFlags(initializer_list_t init) : map_(init) {}
OptionFlags::OptionFlags(const OptionFlags &) = default;
OptionFlags::OptionFlags(OptionFlags &&) noexcept = default;
OptionFlags &OptionFlags::operator=(const OptionFlags &) = default;
OptionFlags &OptionFlags::operator=(OptionFlags &&) noexcept = default;
OptionFlags::~OptionFlags() = default;

} // namespace poplar
