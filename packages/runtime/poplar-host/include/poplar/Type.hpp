// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_Type_hpp
#define poplar_Type_hpp

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace poplar {

/// The element type of a tensor. Only the values below exist; they are
/// compared by identity like Poplar's Type objects.
class Type {
public:
  /// Emulation detail: which element type this is.
  enum class Id : std::uint8_t {
    INVALID,
    BOOL,
    CHAR,
    SIGNED_CHAR,
    UNSIGNED_CHAR,
    SHORT,
    UNSIGNED_SHORT,
    INT,
    UNSIGNED_INT,
    LONGLONG,
    UNSIGNED_LONGLONG,
    HALF,
    FLOAT,
  };

  constexpr Type() = default;
  constexpr explicit Type(Id id) : id_(id) {}

  /// The C++ spelling, as used in template vertex names ("float", "unsigned int").
  std::string toString() const;
  bool isFloatingPoint() const { return id_ == Id::HALF || id_ == Id::FLOAT; }
  bool requiresMetadata() const { return false; }
  std::size_t hash() const { return static_cast<std::size_t>(id_); }

  /// Emulation details: the identity and the device size in bytes.
  constexpr Id id() const { return id_; }
  std::size_t size() const;

  friend constexpr bool operator==(const Type &a, const Type &b) { return a.id_ == b.id_; }
  friend constexpr bool operator!=(const Type &a, const Type &b) { return a.id_ != b.id_; }
  friend constexpr bool operator<(const Type &a, const Type &b) { return a.id_ < b.id_; }

private:
  Id id_ = Id::INVALID;
};

std::ostream &operator<<(std::ostream &os, const Type &t);

extern const Type BOOL;
extern const Type CHAR;
extern const Type SIGNED_CHAR;
extern const Type UNSIGNED_CHAR;
extern const Type SHORT;
extern const Type UNSIGNED_SHORT;
extern const Type INT;
extern const Type UNSIGNED_INT;
extern const Type LONGLONG;
extern const Type UNSIGNED_LONGLONG;
extern const Type HALF;
extern const Type FLOAT;

/// The device type matching a host C++ type (half has no host type).
template <class T> struct equivalent_device_type {};
template <> struct equivalent_device_type<bool> { const Type &value = BOOL; };
template <> struct equivalent_device_type<char> { const Type &value = CHAR; };
template <> struct equivalent_device_type<signed char> { const Type &value = SIGNED_CHAR; };
template <> struct equivalent_device_type<unsigned char> { const Type &value = UNSIGNED_CHAR; };
template <> struct equivalent_device_type<short> { const Type &value = SHORT; };
template <> struct equivalent_device_type<unsigned short> { const Type &value = UNSIGNED_SHORT; };
template <> struct equivalent_device_type<int> { const Type &value = INT; };
template <> struct equivalent_device_type<unsigned> { const Type &value = UNSIGNED_INT; };
template <> struct equivalent_device_type<long long> { const Type &value = LONGLONG; };
template <> struct equivalent_device_type<unsigned long long> { const Type &value = UNSIGNED_LONGLONG; };
template <> struct equivalent_device_type<float> { const Type &value = FLOAT; };

} // namespace poplar

template <> struct std::hash<poplar::Type> {
  std::size_t operator()(const poplar::Type &t) const { return t.hash(); }
};

#endif
