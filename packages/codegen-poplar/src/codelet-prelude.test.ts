import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cppFile } from './codelets.js';

/**
 * tg::workerBegin (cpp/codelet_prelude.hpp) shares a MultiVertex's elements out to its workers.
 * Compiled with g++ and checked for every n up to 300: the workers' runs cover [0, n) once, in
 * order, each starts on a whole chunk (so no two workers store into one 32-bit word), and the
 * runs differ by at most one chunk.
 */

const CXX = process.env['CXX'] || 'g++';
const compilerPresent = spawnSync(CXX, ['--version']).status === 0;

const PROGRAM = `#include <cmath>
#include <cstdio>
#include <initializer_list>
${cppFile('codelet_prelude.hpp')}
int main() {
  int bad = 0;
  for (unsigned workers : {1u, 6u})
    for (unsigned chunk : {1u, 2u, 4u})
      for (unsigned n = 0; n <= 300; ++n) {
        unsigned expectBegin = 0, least = ~0u, most = 0;
        for (unsigned w = 0; w < workers; ++w) {
          const unsigned b = tg::workerBegin(n, chunk, w, workers), e = tg::workerBegin(n, chunk, w + 1, workers);
          const unsigned chunks = (e - b + chunk - 1) / chunk;
          if (b != expectBegin || e < b || (b % chunk != 0 && b != n)) ++bad; // an empty run may start at n
          if (chunks < least) least = chunks;
          if (chunks > most) most = chunks;
          expectBegin = e;
        }
        if (expectBegin != n || most > least + 1) {
          ++bad;
          std::printf("n=%u chunk=%u workers=%u: runs end at %u, %u to %u chunks\\n", n, chunk, workers, expectBegin, least, most);
        }
      }
  std::printf("%d bad\\n", bad);
  return bad == 0 ? 0 : 1;
}
`;

/** Builds `source` with g++ at `opt` (the build must be silent) and runs it: its exit status and output. */
function buildAndRun(source: string, ...opts: string[]): { status: number | null; stdout: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-prelude-'));
  try {
    fs.writeFileSync(path.join(dir, 'program.cpp'), source);
    const build = spawnSync(CXX, ['-std=c++17', ...opts, 'program.cpp', '-o', 'program'], { cwd: dir, encoding: 'utf8' });
    expect(build.stderr).toBe('');
    const run = spawnSync(path.join(dir, 'program'), [], { encoding: 'utf8' });
    return { status: run.status, stdout: run.stdout };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

(compilerPresent ? test : test.skip)('tg::workerBegin splits n elements into contiguous runs of whole chunks, evenly', () => {
  const run = buildAndRun(PROGRAM, '-O1');
  expect(run.stdout).toBe('0 bad\n');
  expect(run.status).toBe(0);
});

/**
 * The select-based helpers (maxFloat, minFloat, reluFloat, signFloat, sigmoidFloat) against
 * their definitions written out here, on every pair of special values (signed zeros, NaN,
 * infinities, the extremes, subnormals) and on values either side of zero, through -O2, where
 * the compiler turns the selects into branchless code.
 */
const SPECIAL = ['0.0f', '-0.0f', '1.0f', '-1.0f', 'NAN', 'INFINITY', '-INFINITY', '3.4e38f', '-3.4e38f', '1e-45f', '-1e-45f', '0.5f', '-2.5f', '88.0f', '-88.0f', '104.0f', '-104.0f'];
const HELPERS_PROGRAM = `#include <cmath>
#include <cstdio>
#include <cstring>
${cppFile('codelet_prelude.hpp')}
static unsigned bits(float x) { unsigned b; std::memcpy(&b, &x, 4); return x != x ? 0x7fc00000u : b; }
int main(int argc, char **) {
  // read through a volatile so the values are not folded at compile time
  volatile float v[] = {${SPECIAL.join(', ')}};
  const unsigned n = sizeof v / sizeof v[0];
  for (unsigned i = 0; i < n; ++i) {
    const float x = v[i];
    std::printf("%08x %08x %08x\\n", bits(tg::reluFloat(x)), bits(tg::signFloat(x)), bits(tg::sigmoidFloat(x)));
    for (unsigned j = 0; j < n; ++j) std::printf("%08x %08x\\n", bits(tg::maxFloat(x, v[j])), bits(tg::minFloat(x, v[j])));
  }
  return argc > 5;
}
`;

(compilerPresent ? test : test.skip)('the max, min, relu, sign and sigmoid helpers keep NaN, signed zeros and infinities', () => {
  const run = buildAndRun(HELPERS_PROGRAM, '-O2');
  expect(run.status).toBe(0);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  const hex = (x: number) => {
    if (Number.isNaN(x)) return '7fc00000';
    f32[0] = x;
    return u32[0]!.toString(16).padStart(8, '0');
  };
  const values = SPECIAL.map((s) => Math.fround(s === 'NAN' ? NaN : s === 'INFINITY' ? Infinity : s === '-INFINITY' ? -Infinity : Number(s.replace(/f$/, ''))));
  const lines = run.stdout.trim().split('\n');
  let k = 0;
  for (const x of values) {
    const [relu, sign, sigmoid] = lines[k++]!.split(' ');
    expect(relu).toBe(hex(Number.isNaN(x) ? x : x > 0 ? x : 0));
    expect(sign).toBe(hex(Number.isNaN(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0));
    // sigmoid through float exp: exact at the ends and at 0, within 2 ulps elsewhere
    const want = Math.fround(1 / (1 + Math.exp(-x)));
    f32[0] = want;
    const wantBits = u32[0]!;
    const got = parseInt(sigmoid!, 16);
    if (Number.isNaN(x) || !Number.isFinite(x) || x === 0) expect(sigmoid).toBe(hex(want));
    else expect(Math.abs(got - wantBits)).toBeLessThanOrEqual(2);
    for (const y of values) {
      const [max, min] = lines[k++]!.split(' ');
      // Math.max/min: NaN propagates, +0 is larger than -0
      expect([x, y, max]).toEqual([x, y, hex(Math.max(x, y))]);
      expect([x, y, min]).toEqual([x, y, hex(Math.min(x, y))]);
    }
  }
  expect(k).toBe(lines.length);
});

/**
 * expFloat and erfFloat against the double-precision functions rounded to float, on every 97th
 * float (44 million, all signs and exponents) and the special values: within 1 ulp, NaN for NaN,
 * signed zeros and infinities kept. Built as codelets are, and once more through TG_WIDE, whose
 * clone for the widest vectors this CPU runs must give the same bits as the plain build.
 */
const MATHS_PROGRAM = `#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <vector>
${cppFile('codelet_prelude.hpp')}
static std::int64_t ordered(float x) { std::int32_t b; std::memcpy(&b, &x, 4); return b < 0 ? -std::int64_t(b & 0x7fffffff) : b; }
static std::int64_t ulps(float got, float want) {
  if (want != want || got != got) return want != want && got != got ? 0 : 1 << 30;
  const std::int64_t d = ordered(got) - ordered(want);
  return d < 0 ? -d : d;
}
static bool same(float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (a != a && b != b); }
TG_WIDE void wideExp(const float *x, float *y, unsigned n) { for (unsigned i = 0; i < n; ++i) y[i] = tg::expFloat(x[i]); }
TG_WIDE void wideErf(const float *x, float *y, unsigned n) { for (unsigned i = 0; i < n; ++i) y[i] = tg::erfFloat(x[i]); }
int main() {
  std::vector<float> x = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 88.7228394f, 88.72284f, -87.33654f, -103.97f, -104.0f, -150.0f, 1e-45f, -1e-45f, 0.99999f, 1.0f, 3.9f, 4.0f, -4.5f};
  for (std::uint64_t b = 0; b < (std::uint64_t(1) << 32); b += 97) {
    const std::uint32_t u = std::uint32_t(b);
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  const unsigned n = unsigned(x.size());
  std::vector<float> e(n), r(n), we(n), wr(n);
  for (unsigned i = 0; i < n; ++i) e[i] = tg::expFloat(x[i]), r[i] = tg::erfFloat(x[i]);
  wideExp(x.data(), we.data(), n);
  wideErf(x.data(), wr.data(), n);
  std::int64_t worstExp = 0, worstErf = 0, differ = 0;
  for (unsigned i = 0; i < n; ++i) {
    const std::int64_t de = ulps(e[i], float(std::exp(double(x[i])))), dr = ulps(r[i], float(std::erf(double(x[i]))));
    if (de > worstExp) worstExp = de;
    if (dr > worstErf) worstErf = dr;
    if (!same(e[i], we[i]) || !same(r[i], wr[i])) ++differ;
  }
  std::printf("exp %lld erf %lld differ %lld of %u\\n", (long long)worstExp, (long long)worstErf, (long long)differ, n);
  return 0;
}
`;

(compilerPresent ? test : test.skip)('expFloat and erfFloat are within 1 ulp on every sampled float, with the same bits at every vector width', () => {
  const run = buildAndRun(MATHS_PROGRAM, '-O2', '-ftree-vectorize', '-fvect-cost-model=dynamic', '-ffp-contract=off');
  expect(run.status).toBe(0);
  expect(run.stdout).toMatch(/^exp [01] erf [01] differ 0 of \d+\n$/);
  expect(Number(run.stdout.split(' ').at(-1))).toBeGreaterThan(44_000_000);
});

/**
 * The element functions a fused vertex calls vectorise at the widths GCC builds codelets for
 * without AVX-512's masked instructions (x86-64 baseline and x86-64-v3): a select that GCC turns
 * into a branch keeps a loop scalar there, several times slower. Checked from GCC's own report
 * of the loops it vectorised, one loop a line.
 */
const ELEMENT_FUNCTIONS = ['expFloat', 'erfFloat', 'sigmoidFloat', 'geluErf', 'reluFloat', 'signFloat'];
const BINARY_FUNCTIONS = ['maxFloat', 'minFloat'];

(compilerPresent ? test : test.skip)('the element functions vectorise without masked vector instructions', () => {
  const loops = [
    ...ELEMENT_FUNCTIONS.map((f) => `void loop_${f}(const float *a, const float *, float *o, unsigned n) { for (unsigned i = 0; i < n; ++i) o[i] = tg::${f}(a[i]); }`),
    ...BINARY_FUNCTIONS.map((f) => `void loop_${f}(const float *a, const float *b, float *o, unsigned n) { for (unsigned i = 0; i < n; ++i) o[i] = tg::${f}(a[i], b[i]); }`),
  ];
  const header = `#include <cmath>\n#include <cstdint>\n${cppFile('codelet_prelude.hpp')}\n`;
  const first = header.split('\n').length;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-prelude-'));
  try {
    fs.writeFileSync(path.join(dir, 'loops.cpp'), header + loops.join('\n') + '\n');
    for (const arch of ['x86-64', 'x86-64-v3']) {
      const build = spawnSync(CXX, ['-std=c++17', '-O2', '-ftree-vectorize', '-fvect-cost-model=dynamic', '-ffp-contract=off', `-march=${arch}`, '-fopt-info-vec-optimized', '-c', 'loops.cpp', '-o', 'loops.o'], { cwd: dir, encoding: 'utf8' });
      expect(build.status).toBe(0);
      const vectorised = new Set([...build.stderr.matchAll(/loops\.cpp:(\d+):\d+: optimized: loop vectorized/g)].map((m) => Number(m[1])));
      const scalar = [...ELEMENT_FUNCTIONS, ...BINARY_FUNCTIONS].filter((_, i) => !vectorised.has(first + i));
      expect({ arch, scalar }).toEqual({ arch, scalar: [] });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
