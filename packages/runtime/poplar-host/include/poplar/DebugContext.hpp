// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_DebugContext_hpp
#define poplar_DebugContext_hpp

#include <poplar/StringRef.hpp>

#include <cstdint>
#include <string>

namespace poplar {

using DebugId = std::uint64_t;

/// A name with an id, passed down through library calls.
class DebugNameAndId {
public:
  DebugNameAndId(std::string name = "", DebugId id = 0, std::string path = "")
      : name_(std::move(name)), id_(id), path_(std::move(path)) {}
  DebugNameAndId(const char *name) : name_(name ? name : "") {}
  DebugNameAndId(DebugId id) : id_(id) {}
  DebugNameAndId(const DebugNameAndId &parent, StringRef name)
      : name_(join(parent.getPathName(), name.str())), id_(parent.id_) {}
  DebugNameAndId(const DebugNameAndId &) = default;
  DebugNameAndId &operator=(const DebugNameAndId &) = default;

  std::string getPathName() const { return path_.empty() ? name_ : join(path_, name_); }
  DebugId getId() const { return id_; }

private:
  static std::string join(const std::string &a, const std::string &b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    return a + "/" + b;
  }
  std::string name_;
  DebugId id_ = 0;
  std::string path_;
};

/// Where an object came from; the emulation uses the path name in messages.
class DebugContext {
public:
  DebugContext() = default;
  DebugContext(const char *name) : name_(name ? name : "") {}
  DebugContext(std::string name) : name_(std::move(name)) {}
  DebugContext(StringRef name) : name_(name.str()) {}
  DebugContext(const DebugNameAndId &dnai) : name_(dnai.getPathName()) {}
  DebugContext(const DebugNameAndId &dnai, StringRef name)
      : name_(join(dnai.getPathName(), name.str())) {}
  DebugContext(const DebugContext &parent, std::string name)
      : name_(join(parent.name_, name)) {}
  DebugContext(const DebugContext &) = default;
  DebugContext &operator=(const DebugContext &) = default;

  std::string getPathName() const { return name_; }
  operator DebugNameAndId() const { return DebugNameAndId(name_); }

private:
  static std::string join(const std::string &a, const std::string &b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    return a + "/" + b;
  }
  std::string name_;
};

} // namespace poplar

#endif
