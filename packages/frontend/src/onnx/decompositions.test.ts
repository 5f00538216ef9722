import { Tensor } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { importOnnx } from './importer.js';
import { ONNX_DTYPE as T } from './proto.js';
import { makeModel, tensor } from './testing.js';

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

  it('RoiAlign with sampling_ratio 0 sizes each grid from its region (bilinear is exact on a linear image)', () => {
    const bytes = makeModel({
      opset: 16,
      nodes: [{ op: 'RoiAlign', inputs: ['x', 'rois', 'bi'], outputs: ['y'], attrs: { output_height: 2, output_width: 2, sampling_ratio: 0 } }],
      inputs: [
        { name: 'x', type: T.FLOAT, shape: [1, 1, 4, 4] },
        { name: 'bi', type: T.INT64, shape: [1] },
      ],
      outputs: [{ name: 'y', type: T.FLOAT }],
      initializers: [tensor('rois', T.FLOAT, [1, 4], [0, 0, 4, 4])],
    });
    // x[h, w] = 4h + w; half_pixel: the region spans [-0.5, 3.5), bins of 2 with 2x2 points at
    // 0, 1 | 2, 3 per axis, so each bin averages to 4·(0.5 or 2.5) + (0.5 or 2.5)
    const out = run(bytes, { x: Tensor.from('float32', [1, 1, 4, 4], [...Array(16).keys()]), bi: Tensor.from('int32', [1], [0]) });
    expect(out['y']!.shape).toEqual([1, 1, 2, 2]);
    expect(Array.from(out['y']!.data)).toEqual([2.5, 4.5, 10.5, 12.5]);
  });

  it('Resize with antialias keeps a ramp where the widened cubic filter lies inside it', () => {
    const bytes = makeModel({
      opset: 18,
      nodes: [{ op: 'Resize', inputs: ['x', '', '', 'sizes'], outputs: ['y'], attrs: { mode: 'cubic', antialias: 1 } }],
      inputs: [{ name: 'x', type: T.FLOAT, shape: [1, 1, 1, 16] }],
      outputs: [{ name: 'y', type: T.FLOAT }],
      initializers: [tensor('sizes', T.INT64, [4], [1, 1, 1, 8])],
    });
    // half_pixel: output o samples x = 2o + 0.5; the filter (8 taps at scale 1/2) is symmetric and
    // sums to 1, so away from the edges a linear ramp comes out as x itself
    const y = Array.from(run(bytes, { x: Tensor.from('float32', [1, 1, 1, 16], [...Array(16).keys()]) })['y']!.data);
    expect(y).toHaveLength(8);
    for (const o of [2, 3, 4, 5]) expect(y[o]).toBeCloseTo(2 * o + 0.5, 5);
  });

  it('TfIdfVectorizer weights unigram counts (TFIDF) and presence (IDF)', () => {
    const model = (mode: string) =>
      makeModel({
        opset: 9,
        nodes: [{ op: 'TfIdfVectorizer', inputs: ['x'], outputs: ['y'], attrs: { mode, min_gram_length: 1, max_gram_length: 1, max_skip_count: 2, ngram_counts: [0], ngram_indexes: [1, 0], pool_int64s: [1, 3], weights: { floats: [0.5, 2] } } }],
        inputs: [{ name: 'x', type: T.INT32, shape: [5] }],
        outputs: [{ name: 'y', type: T.FLOAT }],
      });
    const x = Tensor.from('int32', [5], [1, 2, 1, 3, 1]);
    // 3 occurs once (output 0, weight 0.5), 1 three times (output 1, weight 2); skips do not recount unigrams
    expect(Array.from(run(model('TF'), { x })['y']!.data)).toEqual([1, 3]);
    expect(Array.from(run(model('TFIDF'), { x })['y']!.data)).toEqual([0.5, 6]);
    expect(Array.from(run(model('IDF'), { x })['y']!.data)).toEqual([0.5, 2]);
  });
});
