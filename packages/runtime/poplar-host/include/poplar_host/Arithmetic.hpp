// poplar-host: a tile's floating-point behaviour (the state Poplar's
// FloatingPointBehaviour sets) and the rounding it implies, shared by the
// PopLibs emulation and by `half` in device code.
//
// Until a program or the engine options choose the behaviour, a tile keeps
// IEEE results: round to nearest even, overflow to +-infinity, no traps. The
// SDK's initial tile state is not documented publicly; IEEE results are also
// what tilegraph's reference interpreter computes. Once chosen (`chosen`),
// half overflow follows `nanoo` as the FloatingPointBehaviour reference says:
// NaN (and the invalid flag) when on, +-65504 when off. Float overflow always
// gives +-infinity. `esr` rounds half results stochastically; float results
// always round to nearest.
#ifndef poplar_host_Arithmetic_hpp
#define poplar_host_Arithmetic_hpp

#include <cmath>
#include <cstdint>
#include <cstring>

namespace poplar_host {

/// Exception flags, as the tiles' CSR records them.
enum FpFlag : unsigned { kFpInvalid = 1u, kFpDivZero = 2u, kFpOverflow = 4u };

/// The floating-point behaviour of one tile.
struct FpMode {
  bool inv = false, div0 = false, oflo = false, esr = false, nanoo = false;
  bool chosen = false; ///< overflow handling follows nanoo (else IEEE)
  unsigned traps() const { return (inv ? kFpInvalid : 0u) | (div0 ? kFpDivZero : 0u) | (oflo ? kFpOverflow : 0u); }
  /// True when results are plain IEEE and nothing traps (the fast path).
  bool ieee() const { return !chosen && !esr && traps() == 0; }
};

/// splitmix64's finaliser: the emulation's counter-based generator.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// 53 random bits as a double in [0, 1).
inline double unitInterval(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

/// Half bits of a finite |a| that is a multiple of the half spacing at its
/// size and at most 65504 (no rounding happens).
inline std::uint16_t exactHalfBits(double a) {
  if (a < 0x1.0p-14) return static_cast<std::uint16_t>(a * 0x1.0p24);
  int e;
  const double f = std::frexp(a, &e); // a = f * 2^e, f in [0.5, 1)
  const unsigned m = static_cast<unsigned>((f * 2.0 - 1.0) * 1024.0);
  return static_cast<std::uint16_t>((static_cast<unsigned>(e - 1 + 15) << 10) | m);
}

/// x rounded to half under mode `m`; `u` (uniform in [0, 1)) decides a
/// stochastic rounding: up in magnitude with probability equal to the
/// distance from the lower neighbour over the spacing. Raised flags are
/// added to `flags`.
inline std::uint16_t roundToHalfBits(double x, const FpMode &m, double u, unsigned &flags) {
  if (std::isnan(x)) return std::signbit(x) ? 0xfe00u : 0x7e00u;
  const std::uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  if (std::isinf(x)) return static_cast<std::uint16_t>(sign | 0x7c00u);
  const double a = std::fabs(x);
  bool overflow = false;
  std::uint16_t mag = 0;
  if (m.esr) {
    // the half spacing at a: 2^-24 below 2^-14, else 2^(e-10) for a in [2^e, 2^(e+1))
    double spacing = 0x1.0p-24;
    if (a >= 0x1.0p-14) {
      int e;
      std::frexp(a, &e);
      spacing = std::ldexp(1.0, e - 11);
    }
    const double steps = a / spacing; // exact: a power-of-two scaling
    const double lower = std::floor(steps);
    const double r = (lower + ((steps - lower) > u ? 1.0 : 0.0)) * spacing;
    if (r > 65504.0) overflow = true;
    else mag = exactHalfBits(r);
  } else if (a >= 65520.0) { // rounds past the largest half, 65504
    overflow = true;
  } else {
    int e = 0;
    double q;
    if (a < 0x1.0p-14) {
      q = std::nearbyint(a * 0x1.0p24) * 0x1.0p-24;
    } else {
      std::frexp(a, &e);
      const double spacing = std::ldexp(1.0, e - 11);
      q = std::nearbyint(a / spacing) * spacing; // ties to even under the default rounding mode
    }
    mag = exactHalfBits(q);
  }
  if (!overflow) return static_cast<std::uint16_t>(sign | mag);
  flags |= kFpOverflow;
  if (!m.chosen) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (m.nanoo) {
    flags |= kFpInvalid;
    return 0x7e00u;
  }
  return static_cast<std::uint16_t>(sign | 0x7bffu);
}

/// x rounded to float (to nearest even); a finite x that overflows raises the flag.
inline float roundToFloat(double x, unsigned &flags) {
  const float f = static_cast<float>(x);
  if (std::isinf(f) && !std::isinf(x)) flags |= kFpOverflow;
  return f;
}

/// The arithmetic of the vertex running on this thread: its tile's mode, a
/// generator for stochastic rounding, and the flags its half results raised.
struct TileArithmetic {
  FpMode mode;
  std::uint64_t rng = 0;
  unsigned flags = 0;
  std::uint16_t toHalf(double x) {
    const double u = mode.esr ? unitInterval(mix64(rng++)) : 0.5;
    return roundToHalfBits(x, mode, u, flags);
  }
};

/// Set by the engine while a vertex whose tile is not in the IEEE default
/// runs; `half` then rounds through it.
inline thread_local TileArithmetic *tileArithmetic = nullptr;

} // namespace poplar_host

#endif
