// Engine options: parsing POPLAR_ENGINE_OPTIONS and the typed reads of the options the
// emulation acts on (see engine_options.hpp).
#include "engine_options.hpp"
#include "internal.hpp"

#include <poplar/exceptions.hpp>

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace poplar_host {

std::vector<std::pair<std::string, std::string>> parseOptionsObject(const std::string &text, const char *what) {
  std::size_t i = 0;
  auto fail = [&](const char *problem) {
    return poplar::invalid_option(message(what, ": ", problem, " at character ", i + 1, " of '", text, "'"));
  };
  auto at = [&](char c) { return i < text.size() && text[i] == c; };
  auto space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto string = [&] {
    if (!at('"')) throw fail("expected a string");
    std::string out;
    // \uXXXX at text[i] == 'u' as UTF-8 (a surrogate pair when one follows)
    auto hex4 = [&](std::size_t from) {
      if (from + 4 > text.size()) throw fail("incomplete \\u escape");
      unsigned v = 0;
      for (std::size_t k = from; k < from + 4; ++k) {
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[k])));
        if (!std::isxdigit(static_cast<unsigned char>(c))) throw fail("bad \\u escape");
        v = v * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : c - 'a' + 10);
      }
      return v;
    };
    auto appendCodeUnit = [&](std::size_t &pos) {
      unsigned cp = hex4(pos + 1);
      pos += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && pos + 6 < text.size() && text[pos + 1] == '\\' && text[pos + 2] == 'u') {
        const unsigned lo = hex4(pos + 3);
        if (lo >= 0xDC00 && lo < 0xE000) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          pos += 6;
        }
      }
      if (cp < 0x80) out.push_back(static_cast<char>(cp));
      else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    };
    for (++i; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] != '\\' || i + 1 >= text.size()) {
        out.push_back(text[i]);
        continue;
      }
      // JSON's escapes (a directory name may need them)
      const char e = text[++i];
      if (e == 'n') out.push_back('\n');
      else if (e == 't') out.push_back('\t');
      else if (e == 'r') out.push_back('\r');
      else if (e == 'b') out.push_back('\b');
      else if (e == 'f') out.push_back('\f');
      else if (e == 'u') appendCodeUnit(i);
      else out.push_back(e);
    }
    if (!at('"')) throw fail("unterminated string");
    ++i;
    return out;
  };
  std::vector<std::pair<std::string, std::string>> out;
  space();
  if (!at('{')) throw fail("expected '{'");
  ++i;
  space();
  if (at('}')) ++i;
  else
    for (;;) {
      space();
      std::string key = string();
      space();
      if (!at(':')) throw fail("expected ':'");
      ++i;
      space();
      std::string value;
      if (at('"')) value = string();
      else {
        const std::size_t j = i;
        while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || std::strchr(".+-", text[i])))
          ++i;
        if (i == j) throw fail("expected a value");
        value = text.substr(j, i - j);
      }
      out.emplace_back(std::move(key), std::move(value));
      space();
      if (at(',')) {
        ++i;
        continue;
      }
      if (at('}')) {
        ++i;
        break;
      }
      throw fail("expected ',' or '}'");
    }
  space();
  if (i != text.size()) throw fail("unexpected text after the object");
  return out;
}

poplar::OptionFlags withEnvironmentOptions(const poplar::OptionFlags &opts) {
  const char *env = std::getenv("POPLAR_ENGINE_OPTIONS");
  if (env == nullptr || *env == '\0') return opts;
  poplar::OptionFlags out = opts;
  for (const auto &kv : parseOptionsObject(env, "POPLAR_ENGINE_OPTIONS")) out.set(kv.first, kv.second);
  return out;
}

bool boolOption(const poplar::OptionFlags &o, const char *key, bool &value) {
  const auto it = o.find(key);
  if (it == o.end()) return false;
  if (it->second == "true") value = true;
  else if (it->second == "false") value = false;
  else throw poplar::invalid_option(message("engine option ", key, ": expected true or false, got '", it->second, "'"));
  return true;
}

FpMode initialFpMode(const poplar::OptionFlags &o) {
  FpMode m;
  bool v = false;
  if (boolOption(o, "debug.floatPointOpException", v)) {
    m.inv = m.div0 = m.oflo = v;
    m.chosen = true;
  }
  if (boolOption(o, "debug.nanOverflowMode", v)) {
    m.nanoo = v;
    m.chosen = true;
  }
  if (boolOption(o, "prng.enableStochasticRounding", v)) m.esr = v;
  return m;
}

std::uint64_t initialSeed(const poplar::OptionFlags &o) {
  const auto it = o.find("prng.seed");
  if (it == o.end()) return 0;
  const std::string &v = it->second;
  if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos)
    throw poplar::invalid_option(message("engine option prng.seed: expected an unsigned integer, got '", v, "'"));
  return std::stoull(v);
}

} // namespace poplar_host
