import fc from 'fast-check';
import { DiagnosticError } from '@tilegraph/ir';
import { importOnnx } from './importer.js';
import { ONNX_DTYPE as T } from './proto.js';
import { makeModel, tensor } from './testing.js';

/**
 * Corrupted model files must end in a DiagnosticError (or import fine): never another exception,
 * a hang or an absurd allocation. Valid models are built here and their bytes mutated.
 */

const seeds: Uint8Array[] = [
  // an MLP layer: Gemm + Relu + Softmax with float initializers
  makeModel({
    nodes: [
      { op: 'Gemm', inputs: ['x', 'W', 'b'], outputs: ['h'], name: 'fc', attrs: { transB: 1 } },
      { op: 'Relu', inputs: ['h'], outputs: ['r'], name: 'act' },
      { op: 'Softmax', inputs: ['r'], outputs: ['y'], name: 'sm', attrs: { axis: 1 } },
    ],
    inputs: [{ name: 'x', type: T.FLOAT, shape: ['batch', 3] }],
    outputs: [{ name: 'y', type: T.FLOAT, shape: ['batch', 2] }],
    initializers: [tensor('W', T.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6], true), tensor('b', T.FLOAT, [2], [0.5, -0.5])],
  }),
  // shape arithmetic folded at import: Shape, Gather, Concat, Reshape, Slice, Transpose
  makeModel({
    nodes: [
      { op: 'Shape', inputs: ['x'], outputs: ['s'] },
      { op: 'Gather', inputs: ['s', 'i0'], outputs: ['n'], attrs: { axis: 0 } },
      { op: 'Unsqueeze', inputs: ['n', 'ax'], outputs: ['n1'] },
      { op: 'Concat', inputs: ['n1', 'm1'], outputs: ['shape'], attrs: { axis: 0 } },
      { op: 'Reshape', inputs: ['x', 'shape'], outputs: ['r'] },
      { op: 'Slice', inputs: ['r', 'st', 'en', 'ax', 'sp'], outputs: ['sl'] },
      { op: 'Transpose', inputs: ['sl'], outputs: ['y'], attrs: { perm: [1, 0] } },
    ],
    inputs: [{ name: 'x', type: T.FLOAT, shape: [2, 3, 4] }],
    outputs: [{ name: 'y', type: T.FLOAT }],
    initializers: [
      tensor('i0', T.INT64, [], [0]),
      tensor('ax', T.INT64, [1], [0]),
      tensor('m1', T.INT64, [1], [-1]),
      tensor('st', T.INT64, [1], [0], true),
      tensor('en', T.INT64, [1], [1]),
      tensor('sp', T.INT64, [1], [1]),
    ],
  }),
  // a small CNN: Conv (SAME padding), MaxPool, Pad, Resize, ReduceMean
  makeModel({
    opset: 13,
    nodes: [
      { op: 'Conv', inputs: ['x', 'w'], outputs: ['c'], name: 'conv', attrs: { auto_pad: 'SAME_UPPER', kernel_shape: [3, 3] } },
      { op: 'MaxPool', inputs: ['c'], outputs: ['p'], attrs: { kernel_shape: [2, 2], strides: [2, 2] } },
      { op: 'Pad', inputs: ['p', 'pads'], outputs: ['q'], attrs: { mode: 'reflect' } },
      { op: 'Resize', inputs: ['q', '', 'scales'], outputs: ['z'], attrs: { mode: 'linear' } },
      { op: 'ReduceMean', inputs: ['z'], outputs: ['y'], attrs: { axes: [2, 3], keepdims: 0 } },
    ],
    inputs: [{ name: 'x', type: T.FLOAT, shape: [1, 1, 6, 6] }],
    outputs: [{ name: 'y', type: T.FLOAT }],
    initializers: [
      tensor('w', T.FLOAT, [2, 1, 3, 3], Array.from({ length: 18 }, (_, i) => i / 10)),
      tensor('pads', T.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1]),
      tensor('scales', T.FLOAT, [4], [1, 1, 2, 2]),
    ],
  }),
];

const outcomes = { ok: 0, diagnostic: 0 };

function importOutcome(bytes: Uint8Array): 'ok' | 'diagnostic' {
  try {
    importOnnx(bytes, { batchSize: 2 });
    outcomes.ok++;
    return 'ok';
  } catch (e) {
    if (e instanceof DiagnosticError) {
      outcomes.diagnostic++;
      return 'diagnostic';
    }
    throw e;
  }
}

describe('malformed ONNX files', () => {
  test('the unmutated seeds import', () => {
    for (const s of seeds) expect(() => importOnnx(s, { batchSize: 2 })).not.toThrow();
  });

  test('changed bytes give a model or a DiagnosticError', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: seeds.length - 1 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }),
        (which, edits) => {
          const bytes = new Uint8Array(seeds[which]!);
          for (const [pos, value] of edits) bytes[pos % bytes.length] = value;
          importOutcome(bytes);
        },
      ),
      { numRuns: 400 },
    );
    // single-byte changes often leave a valid model (a changed weight, a renamed node)
    expect(outcomes.ok).toBeGreaterThan(0);
    expect(outcomes.diagnostic).toBeGreaterThan(0);
  });

  test('truncated files give a DiagnosticError', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: seeds.length - 1 }), fc.double({ min: 0, max: 1, noNaN: true }), (which, frac) => {
        const s = seeds[which]!;
        const cut = Math.floor(frac * (s.length - 1));
        importOutcome(s.subarray(0, cut));
      }),
      { numRuns: 200 },
    );
  });

  test('inserted and deleted byte runs give a model or a DiagnosticError', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: seeds.length - 1 }),
        fc.nat(),
        fc.uint8Array({ minLength: 0, maxLength: 12 }),
        fc.integer({ min: 0, max: 12 }),
        (which, at, insert, remove) => {
          const s = seeds[which]!;
          const p = at % s.length;
          const bytes = new Uint8Array([...s.subarray(0, p), ...insert, ...s.subarray(Math.min(s.length, p + remove))]);
          importOutcome(bytes);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('varints of huge lengths and dimensions are refused before allocating', () => {
    // a model whose input dimension is 2^40: the shape check refuses it
    const bytes = makeModel({
      nodes: [{ op: 'ConstantOfShape', inputs: ['shape'], outputs: ['y'] }],
      inputs: [],
      outputs: [{ name: 'y', type: T.FLOAT }],
      initializers: [tensor('shape', T.INT64, [2], [2 ** 20, 2 ** 20])],
    });
    expect(importOutcome(bytes)).toBe('diagnostic');
    // a length prefix far past the end of the buffer
    expect(importOutcome(new Uint8Array([0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]))).toBe('diagnostic');
  });
});
