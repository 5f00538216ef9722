import { Tensor } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { importOnnx } from './importer.js';
import { ONNX_DTYPE as T } from './proto.js';
import { makeModel } from './testing.js';

/** Hand-computed cases of decompositions the ONNX backend tests do not reach. */

function run(bytes: Uint8Array, feeds: Record<string, Tensor>): Record<string, Tensor> {
  const { graph } = importOnnx(bytes);
  return runGraph(graph, feeds, { print: () => {} }).outputs;
}

describe('decomposed ONNX ops', () => {
  it('TensorScatter in circular mode wraps the write past the end of the cache', () => {
    const bytes = makeModel({
      opset: 24,
      nodes: [{ op: 'TensorScatter', inputs: ['cache', 'upd', 'w'], outputs: ['y'], attrs: { mode: 'circular', axis: 1 } }],
      inputs: [
        { name: 'cache', type: T.FLOAT, shape: [2, 4] },
        { name: 'upd', type: T.FLOAT, shape: [2, 2] },
        { name: 'w', type: T.INT64, shape: [2] },
      ],
      outputs: [{ name: 'y', type: T.FLOAT }],
    });
    const out = run(bytes, {
      cache: Tensor.from('float32', [2, 4], [0, 1, 2, 3, 10, 11, 12, 13]),
      upd: Tensor.from('float32', [2, 2], [-1, -2, -3, -4]),
      w: Tensor.from('int32', [2], [3, 1]),
    });
    // batch 0 writes positions 3 and 0; batch 1 positions 1 and 2
    expect(Array.from(out['y']!.data)).toEqual([-2, 1, 2, -1, 10, -3, -4, 13]);
  });

  it('Det of 2x2 and 3x3 matrices', () => {
    const model = (n: number) =>
      makeModel({
        opset: 13,
        nodes: [{ op: 'Det', inputs: ['x'], outputs: ['y'] }],
        inputs: [{ name: 'x', type: T.FLOAT, shape: [2, n, n] }],
        outputs: [{ name: 'y', type: T.FLOAT }],
      });
    // [[1,2],[3,4]] → -2; [[2,0],[0,3]] → 6
    const two = run(model(2), { x: Tensor.from('float32', [2, 2, 2], [1, 2, 3, 4, 2, 0, 0, 3]) });
    expect(Array.from(two['y']!.data)).toEqual([-2, 6]);
    // [[2,0,1],[1,3,2],[1,1,1]] → 2(3-2) - 0 + 1(1-3) = 0; a row swap of the identity → -1
    const three = run(model(3), { x: Tensor.from('float32', [2, 3, 3], [2, 0, 1, 1, 3, 2, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1]) });
    expect(Array.from(three['y']!.data)).toEqual([0, -1]);
  });
});
