import { jest } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { GraphBuilder, Module, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { ModuleInterpreter } from '../reference/module.js';
import { CompiledBackend, initialState } from './backend.js';
import { buildExecutable } from './build.js';
import { listCache } from './cache.js';
import { compareOutputs, randomTensor, seedLibraries } from './testing.js';

/**
 * The translation units of an emulated build are cache entries of their own, keyed by their
 * content: a model whose codelets did not change reuses their compiled registry, and a damaged
 * object is rebuilt. Real builds, in a cache folder of this file's own.
 */

jest.setTimeout(20 * 60 * 1000);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-object-cache-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const cacheDir = path.join(tmp, 'cache');
beforeAll(() => seedLibraries(cacheDir));

/** x [rows, 4] @ w [4, 4] → softsign-like `x / (1 + |x|)` (fused element-wise vertices). */
function model(rows: number): Module {
  const b = new GraphBuilder('forward');
  const x = b.input('x', 'float32', [rows, 4]);
  const w = b.parameter('w', 'float32', [4, 4], { kind: 'init', fn: 'normal', args: { seed: 5 } });
  const h = b.op('matmul', [x, w]);
  b.output('y', b.op('div', [h, b.op('add', [b.op('abs', [h]), b.scalar('float32', 1)])]));
  const graphs = new Map([['forward', b.graph]]);
  return { name: `objects-${rows}`, graphs, program: seq(streamIn(['x']), execute('forward')), replicationFactor: 1, variables: collectVariables(graphs) };
}

const objects = () => new Map(listCache(cacheDir).filter((e) => e.kind === 'object').map((e) => [e.name, e]));

/** Builds the model and checks one run against the reference interpreter. */
function buildAndRun(rows: number) {
  const m = model(rows);
  const sources = generatePoplar(m);
  const built = buildExecutable(sources, { cacheDir, showProgress: false });
  const feed = { x: [randomTensor('float32', [rows, 4], 3)] };
  const backend = new CompiledBackend({ ...built, initial: initialState(m) });
  try {
    const want = new ModuleInterpreter(m).run(feed);
    expect(compareOutputs(backend.run(feed), want)).toEqual([]);
  } finally {
    backend.dispose();
  }
  return sources;
}

test('a model whose codelets are unchanged reuses their compiled registry; only its host program is compiled', () => {
  const first = buildAndRun(3);
  const before = objects();
  expect([...before.keys()].map((n) => n.replace(/-[0-9a-f]+$/, '')).sort()).toEqual(['obj-codelets_registry', 'obj-host']);
  const second = buildAndRun(5);
  // the same vertices (comments aside: they name the module), a different host program
  const code = (text: string) => text.replace(/^\s*\/\/.*$/gm, '');
  expect(code(second.files['codelets.cpp'])).toBe(code(first.files['codelets.cpp']));
  expect(second.files['host.cpp']).not.toBe(first.files['host.cpp']);
  const after = objects();
  const added = [...after.keys()].filter((n) => !before.has(n));
  expect(added.map((n) => n.replace(/-[0-9a-f]+$/, ''))).toEqual(['obj-host']);
  const registry = [...before.values()].find((e) => e.name.startsWith('obj-codelets_registry-'))!;
  expect(after.get(registry.name)!.valid).toBe(true);
  // the objects compiled in the executable's build folder, linked in the same run, then moved into their entries
  for (const e of listCache(cacheDir).filter((x) => x.kind === 'executable')) expect(fs.readdirSync(e.dir).filter((f) => f === 'objects' || f.endsWith('.o'))).toEqual([]);
  expect(fs.readdirSync(cacheDir).filter((f) => f.startsWith('.build-'))).toEqual([]);
});

test('a damaged object is reported, discarded and compiled again', () => {
  const registry = [...objects().values()].find((e) => e.name.startsWith('obj-codelets_registry-'))!;
  const file = path.join(registry.dir, 'codelets_registry.o');
  fs.writeFileSync(file, 'not an object');
  const warnings: string[] = [];
  const m = model(7);
  const built = buildExecutable(generatePoplar(m), { cacheDir, showProgress: false, warn: (w) => warnings.push(w) });
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toMatch(/the cached compiled object .*obj-codelets_registry-[0-9a-f]+ is not used: codelets_registry.o has \d+ bytes/);
  expect(fs.readFileSync(file).subarray(1, 4).toString('latin1')).toBe('ELF');
  const backend = new CompiledBackend({ ...built, initial: initialState(m) });
  backend.dispose();
});

test('codelets popc-reflect cannot read end the build with a diagnostic naming the line, and leave no entry', () => {
  const sources = generatePoplar(model(9));
  const broken = { ...sources, files: { ...sources.files, 'codelets.cpp': `${sources.files['codelets.cpp']}\nnamespace tg {\nclass Broken : public poplar::Vertex {\n  poplar::Input<float> in;\n` } };
  const entries = () => fs.readdirSync(cacheDir).sort();
  const before = entries();
  expect(() => buildExecutable(broken, { cacheDir, showProgress: false })).toThrow(/the build failed: popc-reflect could not read the codelets: .*codelets\.cpp:\d+: /);
  expect(entries()).toEqual(before);
});
