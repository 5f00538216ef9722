// Vertices for ipu_threads.cpp: counters, a vertex that fails, and a
// handshake that only completes when two IPUs run at the same time.
#include <poplar/Vertex.hpp>

#include <atomic>
#include <chrono>
#include <thread>

using namespace poplar;

// Flags the Handshake vertices raise and wait on: [slot * 2 + side]. Each
// handshake uses a fresh slot, so the flags never need resetting.
std::atomic<unsigned> handshakeFlags[64];

// x += step
class AddStep : public Vertex {
public:
  InOut<Vector<int>> x;
  int step;
  bool compute() {
    for (unsigned i = 0; i < x.size(); ++i) x[i] += step;
    return true;
  }
};

// x += y
class Accumulate : public Vertex {
public:
  InOut<Vector<int>> x;
  Input<Vector<int>> y;
  bool compute() {
    for (unsigned i = 0; i < x.size(); ++i) x[i] += y[i];
    return true;
  }
};

// Fails after sleeping delayMs when x exceeds limit.
class FailAbove : public Vertex {
public:
  Input<int> x;
  int limit;
  unsigned delayMs;
  bool compute() {
    if (*x <= limit) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    return false;
  }
};

// Raises this side's flag, then waits (at most timeoutMs) for the other
// side's: `seen` is 1 only if both sides ran at the same time.
class Handshake : public Vertex {
public:
  Input<unsigned> slot;
  Output<unsigned> seen;
  unsigned side;
  unsigned timeoutMs;
  bool compute() {
    const unsigned base = (*slot % 32) * 2;
    handshakeFlags[base + side].store(1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    while (handshakeFlags[base + 1 - side].load() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    *seen = handshakeFlags[base + 1 - side].load();
    return true;
  }
};
