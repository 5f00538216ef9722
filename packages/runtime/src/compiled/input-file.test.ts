import { jest } from '@jest/globals';
import * as fs from 'node:fs';
import { GraphBuilder, Rng, Tensor, collectVariables, execute, repeat, seq, streamIn } from '@tilegraph/ir';
import { ModuleInterpreter } from '../reference/module.js';
import { CompiledBackend } from './backend.js';
import { InputFile } from './input-file.js';
import { compareOutputs } from './testing.js';

jest.setTimeout(20 * 60 * 1000);

describe('InputFile', () => {
  test('small inputs keep the pipe', () => {
    expect(InputFile.create(InputFile.MIN_BYTES - 1)).toBeUndefined();
  });

  test('writes the parts one after another; unlink and close leave nothing behind', () => {
    const f = InputFile.create(InputFile.MIN_BYTES)!;
    expect(f).toBeDefined();
    try {
      expect(fs.statSync(f.path).size).toBe(InputFile.MIN_BYTES);
      expect(fs.statSync(f.path).mode & 0o777).toBe(0o600);
      expect(f.write([Uint8Array.of(1, 2, 3), Uint8Array.of(4, 5)])).toBe(true);
      expect([...fs.readFileSync(f.path).subarray(0, 6)]).toEqual([1, 2, 3, 4, 5, 0]);
      // a second run's inputs start at the beginning again
      expect(f.write([Uint8Array.of(9)])).toBe(true);
      expect([...fs.readFileSync(f.path).subarray(0, 3)]).toEqual([9, 2, 3]);
      f.unlink();
      expect(fs.existsSync(f.path)).toBe(false);
      // still written through its descriptor after the name is gone
      expect(f.write([Uint8Array.of(7)])).toBe(true);
    } finally {
      f.close();
    }
    expect(f.write([Uint8Array.of(1)])).toBe(false);
  });
});

/** x [64, 512] float32 a micro-batch (128 KiB), 4 a run: sums of rows and a scaled copy. */
function largeInputModule() {
  const b = new GraphBuilder('large_inputs');
  const x = b.input('x', 'float32', [64, 512]);
  b.output('rows', b.op('reduce_sum', [x], { axes: [1] }));
  b.output('scaled', b.op('mul', [x, b.constant(Tensor.scalar('float32', 0.5))]));
  const graphs = new Map([['forward', b.graph]]);
  return {
    name: 'large_inputs',
    graphs,
    program: repeat(4, seq(streamIn(['x']), execute('forward'))),
    replicationFactor: 1,
    variables: collectVariables(graphs),
  };
}

test('runs with large inputs take them through the mapped file, fresh every run, with and without output feeds', async () => {
  const module = largeInputModule();
  const written = jest.spyOn(InputFile.prototype, 'write');
  const backend = CompiledBackend.compile(module, { showProgress: false });
  try {
    const rng = new Rng(7);
    const feedsOf = () => ({ x: Array.from({ length: 4 }, () => Tensor.from('float32', [64, 512], Array.from({ length: 64 * 512 }, () => rng.normal()))) });
    const reference = new ModuleInterpreter(module);
    // float32 sums of 512 terms beside the reference's float64: stale or misplaced inputs are off by whole units
    const close = () => ({ rtol: 1e-5, atol: 1e-5 });
    for (let run = 0; run < 3; run++) {
      const feeds = feedsOf();
      expect(compareOutputs(backend.run(feeds), reference.run(feeds), close)).toEqual([]);
    }
    const feeds = feedsOf();
    const fed: string[] = [];
    const out = await backend.runFed(feeds, (name, replica, index) => fed.push(`${name}/${replica}/${index}`));
    expect(compareOutputs(out, reference.run(feeds), close)).toEqual([]);
    expect(fed).toHaveLength(8);
    // every run wrote its inputs into the file, and the executable took them from it
    expect(written.mock.results.map((r) => r.value)).toEqual([true, true, true, true]);
  } finally {
    backend.dispose();
    written.mockRestore();
  }
});
