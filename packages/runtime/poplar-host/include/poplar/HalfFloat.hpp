// poplar-host: a CPU emulation of the public Poplar API.
//
// The IEEE 754 binary16 ("half") type of device code. popc provides `half` as
// a built-in; the emulation provides a class with the same behaviour: every
// arithmetic operation is computed in float and rounded to the nearest half
// (ties to even), and mixing half with float/double promotes like C++ does.
// One difference: `cond ? someHalf : someFloat` is ambiguous here (half and
// float convert both ways); cast one side. While a vertex runs on a tile whose
// floating-point behaviour is set (poplar_host/Arithmetic.hpp), rounding to
// half follows it: saturation or NaN on overflow, stochastic rounding.
#ifndef poplar_HalfFloat_hpp
#define poplar_HalfFloat_hpp

#include <poplar_host/Arithmetic.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <type_traits>

namespace poplar_host {

/// float -> half bits, round to nearest even; overflow gives infinity.
inline std::uint16_t floatToHalfBits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) // infinity or NaN (keep NaN quiet)
    return static_cast<std::uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) // >= 65520 rounds to infinity
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) { // below 2^-14: a subnormal half (or zero)
    if (ax <= 0x33000000u) // <= 2^-25 rounds to zero (2^-25 ties to even 0)
      return static_cast<std::uint16_t>(sign);
    const std::uint32_t e = ax >> 23;
    const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - e; // value / 2^-24 == m >> shift
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  const std::uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r; // carries into the exponent
  return static_cast<std::uint16_t>(sign | r);
}

/// double -> half bits directly (no double rounding through float).
inline std::uint16_t doubleToHalfBits(double d) {
  if (std::isnan(d)) return std::signbit(d) ? 0xfe00u : 0x7e00u;
  const std::uint16_t sign = std::signbit(d) ? 0x8000u : 0u;
  const double a = std::fabs(d);
  if (a >= 65520.0) return sign | 0x7c00u;
  if (a < 6.103515625e-05) { // 2^-14: subnormal, units of 2^-24
    const double q = std::nearbyint(a * 16777216.0); // ties to even
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(q));
  }
  int e;
  const double f = std::frexp(a, &e); // a = f * 2^e, f in [0.5, 1)
  double m = std::nearbyint((f * 2.0 - 1.0) * 1024.0);
  int exp = e - 1;
  if (m >= 1024.0) {
    m = 0;
    ++exp;
  }
  if (exp > 15) return sign | 0x7c00u;
  return static_cast<std::uint16_t>(sign | ((exp + 15) << 10) | static_cast<unsigned>(m));
}

inline float halfBitsToFloat(std::uint16_t h) {
  const std::uint32_t sign = (std::uint32_t(h) & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f; // mant * 2^-24, exact
    return sign ? -v : v;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Rounding to half in device code: IEEE unless the running vertex's tile says otherwise.
inline std::uint16_t deviceHalfBits(float f) {
  TileArithmetic *a = tileArithmetic;
  return a ? a->toHalf(static_cast<double>(f)) : floatToHalfBits(f);
}
inline std::uint16_t deviceHalfBits(double d) {
  TileArithmetic *a = tileArithmetic;
  return a ? a->toHalf(d) : doubleToHalfBits(d);
}

} // namespace poplar_host

/// The device half type (global, as popc spells it).
class half {
public:
  half() = default;
  half(float f) : bits_(poplar_host::deviceHalfBits(f)) {}
  half(double d) : bits_(poplar_host::deviceHalfBits(d)) {}
  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  half(I i) : bits_(poplar_host::deviceHalfBits(static_cast<float>(i))) {}
  operator float() const { return poplar_host::halfBitsToFloat(bits_); }

  static half fromBits(std::uint16_t b) {
    half h;
    h.bits_ = b;
    return h;
  }
  std::uint16_t bits() const { return bits_; }

  half operator-() const { return fromBits(static_cast<std::uint16_t>(bits_ ^ 0x8000u)); }
  half operator+() const { return *this; }
  template <class T> half &operator+=(T o) { return *this = half(float(*this) + float(o)); }
  template <class T> half &operator-=(T o) { return *this = half(float(*this) - float(o)); }
  template <class T> half &operator*=(T o) { return *this = half(float(*this) * float(o)); }
  template <class T> half &operator/=(T o) { return *this = half(float(*this) / float(o)); }
  half &operator++() { return *this += 1.0f; }
  half &operator--() { return *this -= 1.0f; }

private:
  std::uint16_t bits_ = 0;
};

// Device buffers hold IEEE halves; the engine binds them to half fields as is.
static_assert(sizeof(half) == 2 && std::is_trivially_copyable<half>::value, "half must be a 2-byte value type");

namespace poplar_host {
// half op half -> half; half op integer -> half; half op float/double -> float/double.
template <class T> struct HalfPeer {
  using type = std::conditional_t<std::is_floating_point<T>::value, T, half>;
};
template <class T>
using HalfResult = std::enable_if_t<std::is_arithmetic<T>::value, typename HalfPeer<T>::type>;
template <class T>
using HalfCmp = std::enable_if_t<std::is_arithmetic<T>::value, bool>;
} // namespace poplar_host

#define POPLAR_HOST_HALF_ARITH(op)                                                       \
  inline half operator op(half a, half b) { return half(float(a) op float(b)); }         \
  template <class T> poplar_host::HalfResult<T> operator op(half a, T b) {               \
    using R = poplar_host::HalfResult<T>;                                                \
    if constexpr (std::is_same<R, half>::value) return half(float(a) op float(b));       \
    else return R(float(a)) op b;                                                        \
  }                                                                                      \
  template <class T> poplar_host::HalfResult<T> operator op(T a, half b) {               \
    using R = poplar_host::HalfResult<T>;                                                \
    if constexpr (std::is_same<R, half>::value) return half(float(a) op float(b));       \
    else return a op R(float(b));                                                        \
  }
POPLAR_HOST_HALF_ARITH(+)
POPLAR_HOST_HALF_ARITH(-)
POPLAR_HOST_HALF_ARITH(*)
POPLAR_HOST_HALF_ARITH(/)
#undef POPLAR_HOST_HALF_ARITH

#define POPLAR_HOST_HALF_CMP(op)                                                         \
  inline bool operator op(half a, half b) { return float(a) op float(b); }               \
  template <class T> poplar_host::HalfCmp<T> operator op(half a, T b) {                  \
    return double(float(a)) op double(b);                                                \
  }                                                                                      \
  template <class T> poplar_host::HalfCmp<T> operator op(T a, half b) {                  \
    return double(a) op double(float(b));                                                \
  }
POPLAR_HOST_HALF_CMP(==)
POPLAR_HOST_HALF_CMP(!=)
POPLAR_HOST_HALF_CMP(<)
POPLAR_HOST_HALF_CMP(<=)
POPLAR_HOST_HALF_CMP(>)
POPLAR_HOST_HALF_CMP(>=)
#undef POPLAR_HOST_HALF_CMP

inline std::ostream &operator<<(std::ostream &os, half h) { return os << float(h); }

namespace std {
template <> class numeric_limits<half> {
public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 11;
  static half min() { return half::fromBits(0x0400); }
  static half lowest() { return half::fromBits(0xfbff); }
  static half max() { return half::fromBits(0x7bff); }
  static half epsilon() { return half::fromBits(0x1400); }
  static half infinity() { return half::fromBits(0x7c00); }
  static half quiet_NaN() { return half::fromBits(0x7e00); }
  static half denorm_min() { return half::fromBits(0x0001); }
};
} // namespace std

#endif
