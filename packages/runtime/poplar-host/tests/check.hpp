// A minimal checker for the poplar-host test programs: CHECK prints the
// failing condition and counts it; finish() reports and gives the exit code.
#ifndef poplar_host_tests_check_hpp
#define poplar_host_tests_check_hpp

#include <cmath>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace check {

inline int &failures() {
  static int n = 0;
  return n;
}
inline int &passes() {
  static int n = 0;
  return n;
}

inline void report(bool ok, const std::string &what, const char *file, int line) {
  if (ok) {
    ++passes();
  } else {
    ++failures();
    std::cout << file << ":" << line << ": FAILED: " << what << "\n";
  }
}

template <class A, class B> std::string describe(const A &a, const B &b) {
  std::ostringstream os;
  os << "got " << a << ", expected " << b;
  return os.str();
}

template <class T> std::string vec(const std::vector<T> &v) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? " " : "") << v[i];
  return os.str() + ']';
}

/// Runs fn, which must throw an E whose message contains `text`.
template <class E> bool throws(const std::function<void()> &fn, const std::string &text, std::string &seen) {
  try {
    fn();
  } catch (const E &e) {
    seen = e.what();
    return seen.find(text) != std::string::npos;
  } catch (const std::exception &e) {
    seen = std::string("another exception: ") + e.what();
    return false;
  }
  seen = "no exception";
  return false;
}

inline int finish(const char *name) {
  std::cout << name << ": " << passes() << " passed, " << failures() << " failed\n";
  return failures() == 0 ? 0 : 1;
}

} // namespace check

#define CHECK(cond) ::check::report((cond), #cond, __FILE__, __LINE__)
#define CHECK_EQ(a, b) ::check::report((a) == (b), std::string(#a " == " #b ": ") + ::check::describe((a), (b)), __FILE__, __LINE__)
#define CHECK_NEAR(a, b, tol)                                                                                \
  ::check::report(std::fabs(double(a) - double(b)) <= (tol),                                                 \
                  std::string(#a " ~ " #b ": ") + ::check::describe((a), (b)), __FILE__, __LINE__)
#define CHECK_VEC(a, b)                                                                                      \
  ::check::report((a) == (b), std::string(#a " == " #b ": got ") + ::check::vec(a) + ", expected " + ::check::vec(b), \
                  __FILE__, __LINE__)
#define CHECK_THROWS(E, stmt, text)                                                                          \
  do {                                                                                                       \
    std::string seen_;                                                                                       \
    bool ok_ = ::check::throws<E>([&] { stmt; }, text, seen_);                                              \
    ::check::report(ok_, std::string(#stmt " throws " #E " with \"") + (text) + "\": " + seen_, __FILE__, __LINE__); \
  } while (0)

#endif
