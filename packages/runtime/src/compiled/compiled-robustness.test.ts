import { jest } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DiagnosticError, GraphBuilder, Module, Tensor, collectVariables, execute, repeat, seq, streamIn } from '@tilegraph/ir';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { ModuleInterpreter } from '../reference/module.js';
import { compileAndExport, loadExecutable } from './archive.js';
import { CompiledBackend, ExecutableImage } from './backend.js';
import { buildExecutable } from './build.js';
import { compareOutputs, randomTensor } from './testing.js';

jest.setTimeout(30 * 60 * 1000);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-robust-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Names meant to break generated code: quotes, escapes, comment ends, keywords, non-ASCII, length. */
const NAMES = {
  module: '../../etc/"passwd" */ #include <evil>',
  graph: 'for (;;) { } // loop\nclass',
  input: 'x"); system("touch /tmp/pwned"); ("\\',
  weight: 'w */ int main() { return 42; } /* \u00e9\u540d',
  output: 'out\n#define float int\n??=',
  title: 'title "quoted" \\ back\nslash',
  long: 'L'.repeat(10_000),
};

function hostileModule(): Module {
  const b = new GraphBuilder(NAMES.graph);
  const x = b.input(NAMES.input, 'float32', [2, 3]);
  const w = b.parameter(NAMES.weight, 'float32', [3, 2], { kind: 'init', fn: 'normal', args: { seed: 5 } });
  const l = b.parameter(NAMES.long, 'float32', [2], { kind: 'init', fn: 'ones', args: {} });
  const y = b.op('add', [b.op('matmul', [x, w]), l]);
  b.output(NAMES.output, b.op('ipu_print_tensor', [y], { title: NAMES.title }));
  b.output('class', b.op('relu', [y]));
  const graphs = new Map([[NAMES.graph, b.graph]]);
  return { name: NAMES.module, graphs, program: repeat(2, seq(streamIn([NAMES.input]), execute(NAMES.graph))), replicationFactor: 1, variables: collectVariables(graphs) };
}

describe('hostile model names', () => {
  test('the generated code compiles and behaves', () => {
    const m = hostileModule();
    const { files } = generatePoplar(m);
    // outside string literals and comments, no trace of the model's strings
    const code = (text: string) =>
      text
        .split('\n')
        .map((l) => l.replace(/"(?:[^"\\\n]|\\.)*"/g, '""').replace(/\/\/.*$/, ''))
        .join('\n');
    for (const text of [code(files['host.cpp']), code(files['codelets.cpp'])]) {
      expect(text).not.toContain('pwned');
      expect(text).not.toContain('#define float int');
      expect(text).not.toContain('return 42');
      expect(text).not.toContain('evil');
      expect(text).not.toContain('L'.repeat(300));
    }
    const printedDevice: string[] = [];
    const printedReference: string[] = [];
    const compiled = CompiledBackend.compile(m, { showProgress: false, print: (l) => printedDevice.push(l) });
    try {
      const f = { [NAMES.input]: [randomTensor('float32', [2, 3], 1), randomTensor('float32', [2, 3], 2)] };
      const want = new ModuleInterpreter(m, { print: (l) => printedReference.push(l) }).run(f);
      expect(compareOutputs(compiled.run(f), want)).toEqual([]);
      // the device sums a matmul in float32, the reference in double: printed values agree to float32 precision
      const NUM = /-?\d+(?:\.\d+)?(?:e[-+]?\d+)?/g;
      const shape = (lines: string[]) => lines.map((l) => l.replace(NUM, '#'));
      const numbers = (lines: string[]) => lines.flatMap((l) => (l.match(NUM) ?? []).map(Number));
      expect(shape(printedDevice)).toEqual(shape(printedReference));
      const ref = numbers(printedReference);
      numbers(printedDevice).forEach((x, i) => expect(Math.abs(x - ref[i]!)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(ref[i]!))));
      expect(printedDevice[0]!.startsWith(NAMES.title)).toBe(true);
      expect(compiled.read(NAMES.long)[0]!.toArray()).toEqual([1, 1]);
    } finally {
      compiled.dispose();
    }
    expect(fs.existsSync('/tmp/pwned')).toBe(false);
  });
});

function smallModule(): Module {
  const b = new GraphBuilder('forward');
  const x = b.input('x', 'float32', [3, 4]);
  const w = b.parameter('w', 'float32', [4, 4], { kind: 'init', fn: 'normal', args: { seed: 9 } });
  b.output('y', b.op('sigmoid', [b.op('matmul', [x, w])]));
  const graphs = new Map([['forward', b.graph]]);
  return { name: 'small', graphs, program: repeat(2, seq(streamIn(['x']), execute('forward'))), replicationFactor: 1, variables: collectVariables(graphs) };
}

describe('executable cache and export', () => {
  test('a second build of the same sources comes from the cache; other sources do not', () => {
    const cacheDir = path.join(tmp, 'cache');
    const sources = generatePoplar(smallModule());
    const first = buildExecutable(sources, { cacheDir, showProgress: false });
    const second = buildExecutable(sources, { cacheDir, showProgress: false });
    expect(second.cached).toBe(true);
    expect(second.key).toBe(first.key);
    expect(second.executable).toBe(first.executable);
    // no half-built folders are left behind
    expect(fs.readdirSync(cacheDir).filter((f) => f.startsWith('.build-'))).toEqual([]);
    const other = generatePoplar({ ...smallModule(), replicationFactor: 2 });
    expect(buildExecutable(other, { cacheDir, showProgress: false }).key).not.toBe(first.key);
  });

  test('compileAndExport / loadExecutable run without the model', () => {
    const m = smallModule();
    const file = path.join(tmp, 'small.tgexe');
    compileAndExport(m, file, { showProgress: false, cacheDir: path.join(tmp, 'cache') });
    const loaded = loadExecutable(file, { cacheDir: path.join(tmp, 'cache2') });
    const backend = loaded.backend();
    try {
      const f = { x: [randomTensor('float32', [3, 4], 1), randomTensor('float32', [3, 4], 2)] };
      expect(compareOutputs(backend.run(f), new ModuleInterpreter(m).run(f))).toEqual([]);
    } finally {
      backend.dispose();
    }
    fs.writeFileSync(path.join(tmp, 'junk.tgexe'), 'not an executable');
    expect(() => loadExecutable(path.join(tmp, 'junk.tgexe'))).toThrow(/not a tilegraph executable/);
  });
});

/** A fake executable image around a shell script (test-only: the script text is ours). */
function scriptImage(body: string): ExecutableImage {
  const dir = fs.mkdtempSync(path.join(tmp, 'fake-'));
  const exe = path.join(dir, 'step');
  fs.writeFileSync(exe, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  const plan = generatePoplar(smallModule()).plan;
  return { dir, executable: exe, args: [], plan, initial: new Map([['w', Tensor.zeros('float32', [4, 4])]]) };
}

describe('failures of the executable', () => {
  test('a crash surfaces as a diagnostic with its stderr', () => {
    let err: unknown;
    try {
      new CompiledBackend(scriptImage('echo "Out of memory on tile 7: 700000 bytes used but tiles only have 638976 bytes of memory" >&2\nexit 1'));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DiagnosticError);
    expect((err as Error).message).toContain('exited with code 1');
    expect((err as Error).message).toContain('Out of memory on tile 7');
    expect((err as Error).message).toContain('setAvailableMemoryProportion');
  });

  test('a silent executable is stopped after the timeout instead of hanging', () => {
    const start = Date.now();
    expect(() => new CompiledBackend(scriptImage('exec sleep 60'), { stepTimeoutMs: 1500 })).toThrow(/did not answer within 1.5 s/);
    expect(Date.now() - start).toBeLessThan(20_000);
  });

  test('a garbled answer is a protocol error', () => {
    expect(() => new CompiledBackend(scriptImage('read line\necho "what?"\nsleep 5'), { stepTimeoutMs: 20_000 })).toThrow(/answered 'what\?' instead of 'ok'/);
  });
});
