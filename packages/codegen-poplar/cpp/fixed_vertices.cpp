// Vertices the code generator adds as they are, whatever the model: the ring buffers' counters,
// the random streams' step counter and integer matrix products. Each class is copied into
// codelets.cpp under a name of the generator's choosing (the name below is replaced); a class
// runs from its "vertex:" line to the "};" that ends it. The lint of the Poplar API check reads
// them in every generated codelets.cpp.

// vertex: RingAdvance
// Advances a ring buffer's index modulo its depth.
class RingAdvance : public poplar::Vertex {
public:
  poplar::InOut<unsigned> index;
  poplar::Input<unsigned> depth;

  bool compute() {
    *index = *index + 1u == *depth ? 0u : *index + 1u;
    return true;
  }
};

// vertex: StepAdd
// Adds a constant (modulo 2^32) to the random streams' step counter.
class StepAdd : public poplar::Vertex {
public:
  poplar::InOut<unsigned> step;
  unsigned by;

  bool compute() {
    *step = *step + by;
    return true;
  }
};

// vertex: StepIncrement
// Counts graph executions: the step of the random streams, as in the reference interpreter.
class StepIncrement : public poplar::Vertex {
public:
  poplar::InOut<unsigned> step;

  bool compute() {
    *step = *step + 1u;
    return true;
  }
};

// vertex: MatMulInt
// A region of an integer batched matrix product [groups, m, k] x [groups, k, n], from element
// `begin` of the flattened result; sums wrap modulo 2^32 as the IPU's integers do.
template <typename T>
class MatMulInt : public poplar::MultiVertex {
public:
  poplar::Input<poplar::Vector<T>> a;
  poplar::Input<poplar::Vector<T>> b;
  poplar::Output<poplar::Vector<T>> out;
  unsigned begin;
  unsigned m;
  unsigned k;
  unsigned n;

  bool compute(unsigned workerId) {
    for (unsigned i = workerId; i < out.size(); i += numWorkers()) {
      const unsigned o = begin + i;
      const unsigned grp = o / (m * n), row = (o / n) % m, col = o % n;
      unsigned acc = 0;
      for (unsigned p = 0; p < k; ++p) acc += unsigned(a[(grp * m + row) * k + p]) * unsigned(b[(grp * k + p) * n + col]);
      out[i] = T(acc);
    }
    return true;
  }
};
