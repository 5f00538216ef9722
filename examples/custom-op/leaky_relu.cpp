// Poplar codelet of the custom op leaky_relu: y = x > 0 ? x : alpha * x.
// tilegraph connects the op's input to `x`, its result to `y` and its attribute to `alpha`.
#include <poplar/Vertex.hpp>

// each codelet gets a namespace of its own: leaky_relu_grad.cpp defines a slope() too
inline float slope(float x, float alpha) { return x > 0.0f ? 1.0f : alpha; }

class LeakyRelu : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<float>> x;
  poplar::Output<poplar::Vector<float>> y;
  float alpha;

  bool compute() {
    for (unsigned i = 0; i < y.size(); ++i) y[i] = slope(x[i], alpha) * x[i];
    return true;
  }
};
