// Engine options as the engine reads them: the options given to the Engine (or compileGraph)
// with POPLAR_ENGINE_OPTIONS applied over them, as Poplar does, and the typed reads of the few
// options that change what the emulation does.
#ifndef poplar_host_engine_options_hpp
#define poplar_host_engine_options_hpp

#include <poplar/OptionFlags.hpp>
#include <poplar_host/Arithmetic.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace poplar_host {

/// The "key": value pairs of a flat JSON object (values: strings, numbers, true/false);
/// invalid_option naming `what` and the position otherwise.
std::vector<std::pair<std::string, std::string>> parseOptionsObject(const std::string &text, const char *what);

/// Engine options with POPLAR_ENGINE_OPTIONS applied over them, as Poplar does.
poplar::OptionFlags withEnvironmentOptions(const poplar::OptionFlags &opts);

/// A true/false engine option: whether it is set, and its value (invalid_option otherwise).
bool boolOption(const poplar::OptionFlags &o, const char *key, bool &value);

/// The tiles' floating-point mode when the engine loads: IEEE unless the options choose
/// (debug.floatPointOpException traps inv, div0 and oflo; debug.nanOverflowMode is nanoo).
FpMode initialFpMode(const poplar::OptionFlags &o);

/// The seed the tiles' generators start from (engine option prng.seed, else 0).
std::uint64_t initialSeed(const poplar::OptionFlags &o);

} // namespace poplar_host

#endif
