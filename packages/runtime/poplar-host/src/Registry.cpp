// The vertex registry filled by the codelets_registry.cpp files that
// popc-reflect.js writes (their static initialisers call registerVertex).
#include <poplar_host/VertexRegistry.hpp>

#include <cctype>
#include <map>
#include <mutex>

namespace poplar_host {

namespace {
std::map<std::string, VertexDesc> &registry() {
  static std::map<std::string, VertexDesc> r; // a function static: safe during static initialisation
  return r;
}
std::mutex &registryMutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string> &files() {
  static std::vector<std::string> f;
  return f;
}
bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
} // namespace

std::string canonicalVertexName(const std::string &name) {
  // Keep a single blank only between two identifier characters.
  std::string s;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < name.size() && std::isspace(static_cast<unsigned char>(name[j]))) ++j;
      if (!s.empty() && isIdentChar(s.back()) && j < name.size() && isIdentChar(name[j])) s += ' ';
      i = j - 1;
      continue;
    }
    s += c;
  }
  // `unsigned` alone means `unsigned int`.
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s.compare(i, 8, "unsigned") == 0 && (i == 0 || !isIdentChar(s[i - 1])) &&
        (i + 8 == s.size() || !isIdentChar(s[i + 8]))) {
      out += "unsigned";
      std::size_t j = i + 8;
      const bool followedByType = j < s.size() && s[j] == ' ' &&
                                  (s.compare(j + 1, 3, "int") == 0 || s.compare(j + 1, 4, "char") == 0 ||
                                   s.compare(j + 1, 5, "short") == 0 || s.compare(j + 1, 4, "long") == 0);
      if (!followedByType) out += " int";
      i = j;
      continue;
    }
    out += s[i++];
  }
  if (out.compare(0, 2, "::") == 0) out.erase(0, 2);
  return out;
}

VertexBuilder::VertexBuilder(const char *name, bool multiVertex, unsigned numWorkers, void *(*create)(),
                             void (*destroy)(void *), unsigned (*compute)(void *))
    : desc_(new VertexDesc) {
  desc_->name = name;
  desc_->multiVertex = multiVertex;
  desc_->numWorkers = numWorkers;
  desc_->create = create;
  desc_->destroy = destroy;
  desc_->compute = compute;
}

VertexBuilder::~VertexBuilder() = default;

void VertexBuilder::field(const FieldSpec &spec) {
  FieldDesc f;
  f.name = spec.name;
  f.supported = spec.supported;
  f.direction = spec.direction;
  f.shape = spec.shape;
  f.elementType = poplar::Type(spec.elementType);
  f.offset = spec.offset;
  f.bindMember = spec.bindMember;
  f.setMember = spec.setMember;
  desc_->fields.push_back(std::move(f));
}

void VertexBuilder::add() {
  registerVertex(std::move(*desc_));
  desc_.reset();
}

void registerVertex(VertexDesc desc) {
  std::lock_guard<std::mutex> lock(registryMutex());
  desc.name = canonicalVertexName(desc.name);
  auto name = desc.name;
  registry().emplace(std::move(name), std::move(desc)); // the first registration of a name wins
}

namespace {
/// The name with namespace qualifiers removed from its template arguments
/// ("ns::V<ns::Kind::A,poplar::X>" -> "ns::V<A,X>"): template arguments may
/// be spelt relative to different scopes by the host and the codelets.
std::string looseVertexName(const std::string &canonical) {
  const auto lt = canonical.find('<');
  if (lt == std::string::npos) return canonical;
  std::string out = canonical.substr(0, lt);
  std::string word;
  for (std::size_t i = lt; i < canonical.size(); ++i) {
    const char c = canonical[i];
    if (isIdentChar(c)) {
      word += c;
    } else if (c == ':' && i + 1 < canonical.size() && canonical[i + 1] == ':') {
      word.clear(); // a qualifier: drop it
      ++i;
    } else {
      out += word;
      word.clear();
      out += c;
    }
  }
  return out + word;
}
} // namespace

const VertexDesc *findVertex(const std::string &name) {
  std::lock_guard<std::mutex> lock(registryMutex());
  const std::string canonical = canonicalVertexName(name);
  auto it = registry().find(canonical);
  if (it != registry().end()) return &it->second;
  // Fall back to a unique match ignoring qualifiers inside the template arguments.
  const std::string loose = looseVertexName(canonical);
  const VertexDesc *found = nullptr;
  for (const auto &kv : registry()) {
    if (looseVertexName(kv.first) != loose) continue;
    if (found) return nullptr; // ambiguous
    found = &kv.second;
  }
  return found;
}

void registerCodeletsFile(const std::string &name) {
  std::lock_guard<std::mutex> lock(registryMutex());
  files().push_back(name);
}

std::vector<std::string> registeredCodeletsFiles() {
  std::lock_guard<std::mutex> lock(registryMutex());
  return files();
}

std::vector<std::string> registeredVertexNames() {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::vector<std::string> out;
  for (const auto &kv : registry()) out.push_back(kv.first);
  return out;
}

} // namespace poplar_host
