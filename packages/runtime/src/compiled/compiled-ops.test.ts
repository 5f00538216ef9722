import { jest } from '@jest/globals';
import { ModuleInterpreter } from '../reference/module.js';
import { CompiledBackend } from './backend.js';
import { opsFeeds, opsModule } from './ops-fixture.js';
import { compareOutputs, randomTensor } from './testing.js';

/**
 * Every op family compiled for the emulated IPU and compared with the reference interpreter:
 * one module holding a graph per family (built once), run twice so that state and the random
 * streams advance.
 */

jest.setTimeout(30 * 60 * 1000);

describe('compiled ops on the emulated IPU match the reference', () => {
  const m = opsModule();
  let backend: CompiledBackend;
  const printedDevice: string[] = [];
  const printedReference: string[] = [];
  const reference = new ModuleInterpreter(m, { seed: 42, print: (l) => printedReference.push(l) });

  beforeAll(() => {
    backend = CompiledBackend.compile(m, { seed: 42, print: (l) => printedDevice.push(l), showProgress: false });
  });
  afterAll(() => backend?.dispose());

  for (const run of [0, 1]) {
    test(`run ${run}: every output`, () => {
      const f = opsFeeds(m, run);
      const got = backend.run(f);
      const want = reference.run(f);
      // random ops draw the reference's numbers exactly, and broadcast element-wise ops compute them
      const exact = (name: string) => name.startsWith('rn.') || name.startsWith('bc.');
      const problems = compareOutputs(got, want, (name) => (exact(name) ? { rtol: 0, atol: 0 } : undefined));
      expect(problems).toEqual([]);
      expect(printedDevice).toEqual(printedReference);
    });
  }

  test('state reads back as written', () => {
    const w = randomTensor('float32', [4, 5], 77);
    backend.write('mm.w', w);
    expect(backend.read('mm.w')[0]!.data).toEqual(w.data);
  });
});
