// Poplar codelet of the custom op leaky_relu: y = x > 0 ? x : alpha * x.
// tilegraph connects the op's input to `x`, its result to `y` and its attribute to `alpha`.
#include <poplar/Vertex.hpp>

class LeakyRelu : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<float>> x;
  poplar::Output<poplar::Vector<float>> y;
  float alpha;

  bool compute() {
    for (unsigned i = 0; i < y.size(); ++i) y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
    return true;
  }
};
