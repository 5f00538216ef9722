// Helpers shared by tilegraph's generated vertices: scalar maths with the reference
// interpreter's semantics, and the work split of MultiVertex loops. The code generator copies
// this file into every codelets.cpp (after <poplar/Vertex.hpp> and <cmath>).
// Every generated vertex's compute() returns bool (true): SDKs before 3.2 require it, later ones
// accept it as well as void.
// A vertex whose element code is long arithmetic (exp, erf: TG_WIDE on its compute) is built by
// GCC for three x86-64 vector widths, the widest the CPU runs chosen when the program loads;
// other compilers (popc) see a plain function. The bits do not depend on the width: codelets are
// built with -ffp-contract=off, so GCC never fuses a * b + c where the wider targets could.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TG_WIDE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TG_WIDE
#endif
// A vertex of a small compute set (TG_SMALL) has a few elements a tile: vectorised loops buy it
// nothing, and GCC generating them was a quarter of a small model's codelet build.
#if defined(__GNUC__) && !defined(__clang__)
#define TG_SMALL __attribute__((optimize("no-tree-vectorize")))
#else
#define TG_SMALL
#endif

namespace tg {

// Stores a float32 value in an int32 element as JavaScript's ToInt32 does (NaN and inf give 0,
// others truncate and wrap modulo 2^32), so casts agree with the reference interpreter. Exact in
// float32: a value of magnitude 2^31 or more is a whole multiple of 2^8, and so is its remainder.
inline int toInt32(float x) {
  if (!(x == x) || x == INFINITY || x == -INFINITY) return 0;
  if (x > -2147483648.0f && x < 2147483648.0f) return int(x);
  float m = std::fmod(x, 4294967296.0f);
  if (m < 0.0f) m += 4294967296.0f;
  return int(unsigned(m));
}

inline unsigned toUint32(float x) { return unsigned(toInt32(x)); }

// The bits of a float read as an int, and of an int (or unsigned) read as a float (BitCast).
inline int bitsAsInt(float x) {
  int r;
  __builtin_memcpy(&r, &x, sizeof r);
  return r;
}

inline float bitsAsFloat(int x) {
  float r;
  __builtin_memcpy(&r, &x, sizeof r);
  return r;
}

inline float bitsAsFloat(unsigned x) { return bitsAsFloat(int(x)); }

// c ? a : b through a mask on the bits. Used where a select's arms are constants or results
// used nowhere else: GCC turns such a select into a branch, copies the arithmetic that follows
// into each side (a clamp's constant folds into it), and without AVX-512's masked instructions
// the loop around it then does not vectorise (it runs five times slower).
inline float pick(bool c, float a, float b) {
  const int mask = -int(c);
  return bitsAsFloat((bitsAsInt(a) & mask) | (bitsAsInt(b) & ~mask));
}

// The sign bit of a float: true for -0 as for negative values.
inline bool signBit(float x) { return bitsAsInt(x) < 0; }

// Integer division truncating toward zero; division by zero gives 0 and INT_MIN / -1 wraps.
inline int divInt(int a, int b) {
  if (b == 0) return 0;
  if (b == -1) return int(0u - unsigned(a));
  return a / b;
}

inline unsigned divUint(unsigned a, unsigned b) { return b == 0 ? 0u : a / b; }

inline int powInt(int a, int b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 == 0 ? 1 : -1) : 0;
  unsigned r = 1;
  for (int i = 0; i < b; ++i) r *= unsigned(a);
  return int(r);
}

inline unsigned powUint(unsigned a, unsigned b) {
  unsigned r = 1;
  for (unsigned i = 0; i < b; ++i) r *= a;
  return r;
}

// Math.pow: a NaN exponent gives NaN, and so does (+-1) ** (+-inf).
inline float powFloat(float a, float b) {
  if (b != b) return NAN;
  if ((b == INFINITY || b == -INFINITY) && (a == 1.0f || a == -1.0f)) return NAN;
  return std::pow(a, b);
}

// The helpers below choose with selects, not branches on the data: a vertex's runs are short,
// and a mispredicted branch per element cost more than the arithmetic (random signs miss half
// the time). Selects are also what the IPU's workers do best.

// Maximum and minimum propagating NaN; +0 is larger than -0.
inline float maxFloat(float a, float b) {
  const float larger = a > b ? a : b;
  const float equal = signBit(a) ? b : a; // a == b: the one without the sign bit
  const float r = a == b ? equal : larger;
  return a != a || b != b ? NAN : r;
}

inline float minFloat(float a, float b) {
  const float smaller = a < b ? a : b;
  const float equal = signBit(a) ? a : b;
  const float r = a == b ? equal : smaller;
  return a != a || b != b ? NAN : r;
}

// e^x and erf(x) within 1 ulp of the correctly rounded result over every float (tested), in
// plain arithmetic and selects, so a loop of them vectorises where a libm call per element
// cannot; the device runs the same code, so the emulated and device results agree bit for bit.

// e^x: n = round(x / ln 2) and r = x - n ln 2 (ln 2 in two parts, the first exact in n ln 2),
// e^r by a polynomial on [-ln 2 / 2, ln 2 / 2], then 2^n as two halves, each a normal float for
// every n the clamp allows, so results below 2^-126 round once, as subnormals.
inline float expFloat(float x) {
  const float c = pick(x > 88.7228394f, 88.7228394f, pick(x >= -104.0f, x, -104.0f)); // NaN too: int(n) stays defined
  const float n = (c * 1.44269504f + 12582912.0f) - 12582912.0f; // 1.5 * 2^23 rounds to an integer
  const float r = (c - n * 0.693145751953125f) - n * 1.42860677e-06f;
  const float q = 4.999999345e-01f + r * (1.666652063e-01f + r * (4.166838809e-02f + r * (8.368717091e-03f + r * 1.381459638e-03f)));
  const float p = 1.0f + (r + r * r * q);
  const int k = int(n), h = k >> 1;
  const float e = p * bitsAsFloat((h + 127) << 23) * bitsAsFloat((k - h + 127) << 23);
  const float finite = pick(x > 88.7228394f, INFINITY, e); // above, e^x is over the largest float
  return pick(x != x, x, finite);
}

// erf(x): below 1, x + x * P(x^2) (erf(x) / x - 1 is small, so its rounding errors are too);
// from 1 to 4, 1 - e^(-x^2) S(1 / x); above 4, erf(x) rounds to 1. Odd in x; NaN stays.
inline float erfFloat(float x) {
  const float a = std::fabs(x);
  const float c = pick(a > 4.0f, 4.0f, a);
  const float t = c * c;
  const float small = c + c * (1.283791657e-01f + t * (-3.761262584e-01f + t * (1.128358527e-01f + t * (-2.685381607e-02f + t * (5.188334504e-03f + t * (-8.010247672e-04f + t * 7.854026366e-05f))))));
  const float u = 1.0f / pick(c > 1.0f, c, 1.0f);
  const float s = 1.210782587e-04f + u * (5.617679635e-01f + u * (2.053584665e-02f + u * (-3.758630968e-01f + u * (2.303950832e-01f + u * (2.383342116e-01f + u * (-5.369493323e-01f + u * (4.382409928e-01f + u * (-1.797132366e-01f + u * 3.071407213e-02f))))))));
  const float large = 1.0f - expFloat(-t) * s;
  const float r = std::copysign(pick(c < 1.0f, small, large), x);
  return pick(x != x, x, r);
}

// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (neither overflows): one exp of -|x|.
inline float sigmoidFloat(float x) {
  const float e = expFloat(-std::fabs(x));
  return pick(x >= 0, 1.0f, e) / (1.0f + e);
}

inline float reluFloat(float x) {
  const float r = x > 0 ? x : 0.0f; // -0 and negatives give +0
  return x != x ? x : r;            // NaN stays
}

inline float signFloat(float x) {
  const float s = x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
  return x != x ? x : s;
}

inline float geluErf(float x) { return 0.5f * x * (1.0f + erfFloat(x * 0.70710678118654752f)); }

inline float geluTanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// A gather index: negative indices count from the end; out-of-range ones read row 0.
inline unsigned wrapIndex(int i, unsigned dim) {
  long long j = i < 0 ? (long long)i + (long long)dim : (long long)i;
  return j < 0 || j >= (long long)dim ? 0u : unsigned(j);
}

// A dynamic slice start clamped to [0, max].
inline unsigned clampIndex(int i, int max) { return unsigned(i < 0 ? 0 : i > max ? max : i); }

inline bool truthy(float x) { return x != 0.0f && x == x; }

// Elements per worker chunk in a MultiVertex writing outputs of the given element types: enough
// of the narrowest to fill a 32-bit word. Sub-word stores are read-modify-write of the whole
// word, so two workers must never write parts of one word; with outputs aligned to 4 bytes and
// chunks of whole words, they do not.
constexpr unsigned wordChunkOf(unsigned bytes) { return bytes < 4u ? 4u / bytes : 1u; }
constexpr unsigned maxOf(unsigned a, unsigned b) { return a > b ? a : b; }
template <typename T> constexpr unsigned wordChunk() { return wordChunkOf(unsigned(sizeof(T))); }
template <typename T, typename U, typename... Rest> constexpr unsigned wordChunk() {
  return maxOf(wordChunk<T>(), wordChunk<U, Rest...>());
}

// Where the elements of worker `worker` of `workers` start, out of n split into chunks of `chunk`
// elements: each worker takes one contiguous run of whole chunks, the chunks shared out as evenly
// as they can be (worker `workers` starts at n). Contiguous runs keep every worker's loads and
// stores sequential, which vectorises where the element code allows it.
inline unsigned workerBegin(unsigned n, unsigned chunk, unsigned worker, unsigned workers) {
  const unsigned chunks = (n + chunk - 1u) / chunk;
  const unsigned extra = chunks % workers;
  const unsigned first = worker * (chunks / workers) + (worker < extra ? worker : extra);
  return first * chunk < n ? first * chunk : n;
}

} // namespace tg
