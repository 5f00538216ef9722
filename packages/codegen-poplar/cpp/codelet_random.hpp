// Random numbers for tilegraph's random-op vertices: the reference interpreter's counter-based
// generator (packages/ir/src/random.ts), operation for operation in float32, so that the device
// draws the reference's values bit for bit. Element i of a random op is computed from
// (key, step, i) alone, so each worker makes its own elements without replaying the others'.
// The code generator copies this file into codelets.cpp after codelet_prelude.hpp.
namespace tg {

inline unsigned rotl32(unsigned x, unsigned r) { return (x << r) | (x >> (32u - r)); }

// Threefry-2x32 with 20 rounds (Salmon et al., SC 2011; the generator of JAX): the first output
// word for key (k0, k1) and counter (c0, c1).
inline unsigned threefry2x32(unsigned k0, unsigned k1, unsigned c0, unsigned c1) {
  const unsigned ks[3] = {k0, k1, k0 ^ k1 ^ 0x1bd11bdau};
  const unsigned rot[2][4] = {{13u, 15u, 26u, 6u}, {17u, 29u, 16u, 24u}};
  unsigned x0 = c0 + ks[0];
  unsigned x1 = c1 + ks[1];
  for (unsigned s = 1; s <= 5u; ++s) {
    for (unsigned i = 0; i < 4u; ++i) {
      x0 += x1;
      x1 = rotl32(x1, rot[(s + 1u) % 2u][i]);
      x1 ^= x0;
    }
    x0 += ks[s % 3u];
    x1 += ks[(s + 1u) % 3u] + s;
  }
  return x0;
}

// The 32 random bits of element `index` of a random op with key (op seed ^ run seed) at `step`.
inline unsigned counterBits(unsigned key, unsigned step, unsigned index) { return threefry2x32(key, step, index, 0u); }

// Uniform in [0, 1): the top 24 bits times 2^-24 (exact).
inline float uniformFromBits(unsigned bits) { return float(bits >> 8) * 5.9604644775390625e-8f; }

// Below, each statement is one float32 operation, so that no compiler fuses a multiply and an add
// into one rounding that the reference does not make.

// ln(n * 2^-24) for an integer 1 <= n < 2^24: n = m * 2^e with m in (sqrt(1/2), sqrt(2)], then
// ln m = 2s(1 + s^2/3 + s^4/5 + ...) with s = (m - 1) / (m + 1).
inline float logScaled(unsigned n) {
  int e = 31;
  while ((n >> unsigned(e)) == 0u) --e;
  union {
    unsigned u;
    float f;
  } scale;
  scale.u = unsigned(127 - e) << 23; // 2^-e
  float m = float(n) * scale.f;
  if (m > 1.4142135f) {
    m = m * 0.5f;
    e = e + 1;
  }
  const float below = m - 1.0f;
  const float above = m + 1.0f;
  const float s = below / above;
  const float z = s * s;
  float p = 0.09090909f;
  p = p * z;
  p = p + 0.11111111f;
  p = p * z;
  p = p + 0.14285715f;
  p = p * z;
  p = p + 0.2f;
  p = p * z;
  p = p + 0.33333334f;
  const float w = z * p;
  const float s2 = s + s;
  const float sw = s2 * w;
  const float lm = s2 + sw;
  // ln 2 in two parts: small multiples of the high part are exact
  const float k = float(e - 24);
  const float hi = k * 0.693145751953125f;
  const float lo = k * 0.0000014286068f;
  const float rest = lo + lm;
  return hi + rest;
}

// A standard normal value from 32 random bits: the inverse normal CDF by Wichura's PPND7
// (Applied Statistics algorithm AS 241, single precision; all coefficients positive, so float32
// evaluation is stable) at p = (2k + 1) / 2^24 for the top 23 bits k.
inline float normalFromBits(unsigned bits) {
  const int m = int((bits >> 9) * 2u + 1u) - 8388608; // 2^24 (p - 1/2), odd
  const float q = float(m) * 5.9604644775390625e-8f;
  const int am = m < 0 ? -m : m;
  if (am <= 7130316) { // |p - 1/2| <= 0.425
    const float qq = q * q;
    const float r = 0.180625f - qq;
    float a = 59.109375f;
    a = a * r;
    a = a + 159.29114f;
    a = a * r;
    a = a + 50.434273f;
    a = a * r;
    a = a + 3.3871326f;
    const float num = q * a;
    float b = 67.18756f;
    b = b * r;
    b = b + 78.75776f;
    b = b * r;
    b = b + 17.89517f;
    const float br = b * r;
    const float den = br + 1.0f;
    return num / den;
  }
  // the tails: min(p, 1 - p) = n * 2^-24, with -ln of it at most 16.7
  const float l = -logScaled(unsigned(8388608 - am));
  const float root = std::sqrt(l);
  const float r = root - 1.6f;
  float c = 0.17023821f;
  c = c * r;
  c = c + 1.3067285f;
  c = c * r;
  c = c + 2.7568154f;
  c = c * r;
  c = c + 1.4234372f;
  float d = 0.12021133f;
  d = d * r;
  d = d + 0.73700166f;
  const float dr = d * r;
  const float den = dr + 1.0f;
  const float z = c / den;
  return m < 0 ? -z : z;
}

} // namespace tg
