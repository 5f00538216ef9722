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

(compilerPresent ? test : test.skip)('tg::workerBegin splits n elements into contiguous runs of whole chunks, evenly', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-prelude-'));
  try {
    fs.writeFileSync(path.join(dir, 'split.cpp'), PROGRAM);
    const build = spawnSync(CXX, ['-std=c++17', '-O1', 'split.cpp', '-o', 'split'], { cwd: dir, encoding: 'utf8' });
    expect(build.stderr).toBe('');
    const run = spawnSync(path.join(dir, 'split'), [], { encoding: 'utf8' });
    expect(run.stdout).toBe('0 bad\n');
    expect(run.status).toBe(0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
