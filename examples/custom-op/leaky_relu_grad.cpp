// Poplar codelet of leaky_relu_grad: dx = dy * (x > 0 ? 1 : alpha).
#include <poplar/Vertex.hpp>

inline float slope(float x, float alpha) { return x > 0.0f ? 1.0f : alpha; }

class LeakyReluGrad : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<float>> x;
  poplar::Input<poplar::Vector<float>> y;
  poplar::Input<poplar::Vector<float>> dy;
  poplar::Output<poplar::Vector<float>> dx;
  float alpha;

  bool compute() {
    for (unsigned i = 0; i < dx.size(); ++i) dx[i] = slope(x[i], alpha) * dy[i];
    return true;
  }
};
