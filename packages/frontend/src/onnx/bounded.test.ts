import { Tensor } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { OnnxUnsupportedError } from './errors.js';
import { importOnnx } from './importer.js';
import { ONNX_DTYPE as T } from './proto.js';
import { makeModel } from './testing.js';

/** Data-dependent output sizes: padded to the bound given at import, with a count output. */

function nonZeroModel(): Uint8Array {
  return makeModel({
    opset: 13,
    nodes: [{ op: 'NonZero', inputs: ['x'], outputs: ['nz'], name: 'n0' }],
    inputs: [{ name: 'x', type: T.FLOAT, shape: [2, 3] }],
    outputs: [{ name: 'nz', type: T.INT64 }],
  });
}

describe('outputs of data-dependent size', () => {
  it('without a bound, the import says what depends on the data and which option to give', () => {
    let err: unknown;
    try {
      importOnnx(nonZeroModel());
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OnnxUnsupportedError);
    const u = err as OnnxUnsupportedError;
    expect(u.diagnostics[0]!.message).toMatch(/NonZero node 'n0': the number of non-zero elements depends on the data, but IPU programs have static shapes/);
    expect(u.diagnostics[0]!.notes?.join(' ')).toMatch(/maxOutputs: \{ 'nz': N \}/);
    expect(u.needsOutputBound).toEqual({ key: 'nz', outputs: [{ name: 'nz', axis: 1 }] });
  });

  it('NonZero pads its columns with -1 up to the bound and counts the valid ones', () => {
    const { graph } = importOnnx(nonZeroModel(), { maxOutputs: { nz: 5 } });
    // non-zeros of [[0, 2, 0], [3, 0, 4]] at (0,1), (1,0), (1,2)
    const x = Tensor.from('float32', [2, 3], [0, 2, 0, 3, 0, 4]);
    const out = runGraph(graph, { x }, { print: () => {} }).outputs;
    expect(out['nz']!.shape).toEqual([2, 5]);
    expect(Array.from(out['nz']!.data)).toEqual([0, 1, 1, -1, -1, 1, 0, 2, -1, -1]);
    expect(Array.from(out['nz_count']!.data)).toEqual([3]);
  });

  it('a bound smaller than the count keeps the first entries; a negative one is refused', () => {
    const { graph } = importOnnx(nonZeroModel(), { maxOutputs: { nz: 2 } });
    const x = Tensor.from('float32', [2, 3], [0, 2, 0, 3, 0, 4]);
    const out = runGraph(graph, { x }, { print: () => {} }).outputs;
    expect(Array.from(out['nz']!.data)).toEqual([0, 1, 1, 0]);
    expect(Array.from(out['nz_count']!.data)).toEqual([3]);
    expect(() => importOnnx(nonZeroModel(), { maxOutputs: { nz: -1 } })).toThrow(/maxOutputs\['nz'\] must be a non-negative integer/);
  });

  it('Unique pads values and counts with 0 and indices with -1', () => {
    const bytes = makeModel({
      opset: 11,
      nodes: [{ op: 'Unique', inputs: ['x'], outputs: ['y', 'idx', 'inv', 'cnt'], name: 'u', attrs: { sorted: 1 } }],
      inputs: [{ name: 'x', type: T.INT32, shape: [6] }],
      outputs: ['y', 'idx', 'inv', 'cnt'].map((name) => ({ name, type: name === 'y' ? T.INT32 : T.INT64 })),
    });
    const { graph } = importOnnx(bytes, { maxOutputs: { y: 4 } });
    const x = Tensor.from('int32', [6], [5, -2, 5, 7, -2, 5]);
    const out = runGraph(graph, { x }, { print: () => {} }).outputs;
    // sorted unique values -2, 5, 7; first seen at 1, 0, 3
    expect(Array.from(out['y']!.data)).toEqual([-2, 5, 7, 0]);
    expect(Array.from(out['idx']!.data)).toEqual([1, 0, 3, -1]);
    expect(Array.from(out['inv']!.data)).toEqual([1, 0, 1, 2, 0, 1]);
    expect(Array.from(out['cnt']!.data)).toEqual([2, 3, 1, 0]);
    expect(Array.from(out['y_count']!.data)).toEqual([3]);
  });
});
