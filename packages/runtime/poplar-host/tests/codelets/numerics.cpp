// Vertices for the numerics test: half and float arithmetic whose rounding,
// overflow and exceptions follow the tile's floating-point behaviour.
#include <poplar/Vertex.hpp>

using namespace poplar;

class HalfAdd : public Vertex {
public:
  Input<Vector<half>> a, b;
  Output<Vector<half>> out;

  void compute() {
    for (unsigned i = 0; i < out.size(); ++i) out[i] = a[i] + b[i];
  }
};

// a * b and a / b in float.
class FloatOps : public Vertex {
public:
  Input<Vector<float>> a, b;
  Output<Vector<float>> prod, quot;

  void compute() {
    for (unsigned i = 0; i < a.size(); ++i) {
      prod[i] = a[i] * b[i];
      quot[i] = a[i] / b[i];
    }
  }
};
