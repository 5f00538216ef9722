// Vertices for the poplar-host tests, written as for popc. The odd layout in
// places is deliberate: popc-reflect must cope with it.
#include <poplar/Vertex.hpp>
#include <cmath>

using namespace poplar;

/* A single-worker vertex summing its input (Poplar tutorial 3). */
class SumVertex : public Vertex {
public:
  Input<Vector<float>> in;   // the values to add
  Output<float> out;

  bool compute() {
    float sum = 0;
    for (unsigned i = 0; i < in.size(); ++i) sum += in[i];
    *out = sum;
    return true;
  }
};

// y += scale * x, split over the six workers.
template <typename T>
class
    ScaleAdd
    : public poplar::MultiVertex {
public:
  Input<Vector<T>> x;
  InOut<Vector<T>> y;
  T scale; // set with setInitialValue

  void compute(unsigned workerId) {
    for (unsigned i = workerId; i < y.size(); i += numWorkers())
      y[i] = T(float(y[i]) + float(scale) * float(x[i]));
  }
};
template class ScaleAdd<float>;
template class ScaleAdd<half>;

// Each worker marks its element; worker `failOn` returns false instead.
class MarkWorkers : public poplar::MultiVertex {
public:
  InOut<Vector<int>> marks;
  unsigned failOn;

  bool compute(unsigned workerId) {
    if (workerId == failOn) return false;
    marks[workerId] += 1;
    return true;
  }
};

namespace tg {
namespace util {

// Concatenates a list of regions.
struct Concat : Vertex {
  Vector<Input<Vector<float>>> in;
  Output<Vector<float>> out;
  void compute() {
    unsigned k = 0;
    for (unsigned r = 0; r < in.size(); ++r)
      for (unsigned i = 0; i < in[r].size(); ++i) out[k++] = in[r][i];
  }
};

} // namespace util

/* Fields inherited from a base class that is not a vertex itself. */
struct UnaryBase : public poplar::Vertex {
  Input<Vector<float>> in;
  Output<Vector<float>> out;
};

struct Square : UnaryBase {
  void compute() {
    for (unsigned i = 0; i < in.size(); ++i) out[i] = in[i] * in[i];
  }
};

// A template with a default argument and a non-type parameter.
template <typename T, bool Negate = false> class Copy1 : public Vertex {
public:
  Input<T> a;
  Output<T> b;
  bool compute() {
    *b = Negate ? T(-*a) : T(*a);
    return true;
  }
};

} // namespace tg

template class tg::Copy1<float>;
template class tg::Copy1<int, true>;

// State declared const and a constructor declared but not defined, as popc
// code may write; and a vertex that can fail.
class AddConst : public Vertex {
public:
  AddConst();
  [[maybe_unused]] Input<Vector<int>> in;
  Output<Vector<int>> out;
  const int delta;
  const unsigned short unusedState;
  Vector<unsigned> offsets; // vector state

  bool compute() {
    if (delta == 13) return false; // an unlucky delta fails
    for (unsigned i = 0; i < in.size(); ++i)
      out[i] = in[i] + delta + int(offsets.size() > i ? offsets[i] : 0u);
    return true;
  }
};

#if 0
class NotCompiled : public Vertex { this is not C++ };
#endif

// Swaps nothing by itself: two of these in one compute set swap two
// tensors, which only works if every vertex reads before any writes (BSP).
class Move : public Vertex {
public:
  Input<Vector<float>> src;
  Output<Vector<float>> dst;
  void compute() {
    for (unsigned i = 0; i < src.size(); ++i) dst[i] = src[i];
  }
};

// *pred = *x < limit (drives RepeatWhileTrue in the tests).
class Below : public Vertex {
public:
  Input<int> x;
  Output<bool> pred;
  int limit;
  bool compute() {
    *pred = *x < limit;
    return true;
  }
};

namespace tg {
// An enum template argument, instantiated with a name relative to namespace tg.
enum class Sign { Plus, Minus };
template <Sign S> class Signed : public Vertex {
public:
  Input<float> a;
  Output<float> b;
  void compute() { *b = S == Sign::Minus ? -*a : *a; }
};
template class Signed<Sign::Minus>;
} // namespace tg
