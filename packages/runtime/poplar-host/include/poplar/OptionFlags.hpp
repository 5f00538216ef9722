// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_OptionFlags_hpp
#define poplar_OptionFlags_hpp

#include <poplar/StringRef.hpp>

#include <initializer_list>
#include <map>
#include <ostream>
#include <string>
#include <utility>

namespace poplar {

/// String key/value options, e.g. {{"availableMemoryProportion", "0.3"}}.
/// The emulation records them; only a few change behaviour (see the README).
class OptionFlags {
public:
  using initializer_list_t = std::initializer_list<std::pair<const std::string, std::string>>;
  using iterator = std::map<std::string, std::string>::const_iterator;

  // out of line, as in the SDK: a program building many option sets does not compile the map's
  // construction, copy and destruction itself
  OptionFlags();
  OptionFlags(initializer_list_t init);
  OptionFlags(const OptionFlags &);
  OptionFlags(OptionFlags &&) noexcept;
  OptionFlags &operator=(const OptionFlags &);
  OptionFlags &operator=(OptionFlags &&) noexcept;
  ~OptionFlags();

  void set(initializer_list_t init) {
    for (const auto &kv : init) map_[kv.first] = kv.second;
  }
  void set(StringRef option, StringRef value) { map_[option.str()] = value.str(); }
  /// The value of an option; throws std::out_of_range when it is unset.
  StringRef at(StringRef option) const { return StringRef(map_.at(option.str())); }
  iterator find(StringRef option) const { return map_.find(option.str()); }
  void remove(StringRef option) { map_.erase(option.str()); }
  void clear() { map_.clear(); }
  std::size_t size() const { return map_.size(); }
  iterator begin() const { return map_.begin(); }
  iterator end() const { return map_.end(); }
  friend bool operator==(const OptionFlags &a, const OptionFlags &b) { return a.map_ == b.map_; }

  /// Emulation helper: the value of an option or a default.
  std::string get(const std::string &option, const std::string &dflt) const {
    auto it = map_.find(option);
    return it == map_.end() ? dflt : it->second;
  }

private:
  std::map<std::string, std::string> map_;
};

inline std::ostream &operator<<(std::ostream &os, const OptionFlags &f) {
  os << '{';
  bool first = true;
  for (const auto &kv : f) {
    os << (first ? "" : ", ") << '"' << kv.first << "\": \"" << kv.second << '"';
    first = false;
  }
  return os << '}';
}

} // namespace poplar

#endif
