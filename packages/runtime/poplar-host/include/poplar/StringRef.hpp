// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_StringRef_hpp
#define poplar_StringRef_hpp

#include <cstddef>
#include <ostream>
#include <string>

namespace poplar {

/// A string argument. Poplar's StringRef is a borrowed view; the emulation
/// keeps a copy so that no caller can leave it dangling.
class StringRef {
public:
  StringRef() = default;
  StringRef(const char *s) : s_(s ? s : "") {}
  StringRef(const char *s, std::size_t n) : s_(s, n) {}
  StringRef(const std::string &s) : s_(s) {}
  operator std::string() const { return s_; }
  std::string cloneAsString() const { return s_; }
  const char *data() const { return s_.data(); }
  const char *c_str() const { return s_.c_str(); }
  std::size_t size() const { return s_.size(); }
  bool empty() const { return s_.empty(); }
  const std::string &str() const { return s_; }
  friend bool operator==(const StringRef &a, const StringRef &b) { return a.s_ == b.s_; }
  friend bool operator!=(const StringRef &a, const StringRef &b) { return a.s_ != b.s_; }
  friend std::ostream &operator<<(std::ostream &os, const StringRef &s) { return os << s.s_; }
  friend std::string operator+(const std::string &a, const StringRef &b) { return a + b.s_; }
  friend std::string operator+(const StringRef &a, const std::string &b) { return a.s_ + b; }

private:
  std::string s_;
};

} // namespace poplar

#endif
