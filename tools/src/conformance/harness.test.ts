import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ONNX_DTYPE as T, encodeTensor, onnxTesting } from '@tilegraph/frontend';
import { Tensor } from '@tilegraph/ir';
import { compareOutput, runConformanceTest, summarize } from './harness.js';

const f32 = (values: number[]) => ({ tensor: Tensor.from('float32', [values.length], values), float: true });

describe('compareOutput', () => {
  test('floats match within atol + rtol·|want|', () => {
    // |1000.9 - 1000| = 0.9 <= 1e-5 + 1e-3·1000 = 1.00001; |1001.1 - 1000| = 1.1 is not
    expect(compareOutput('y', f32([1000]), Tensor.from('float32', [1], [1000.9]))).toBeUndefined();
    expect(compareOutput('y', f32([1000]), Tensor.from('float32', [1], [1001.1]))).toContain('1 of 1 values differ');
    // near zero the absolute tolerance rules: 1e-5 passes, 2e-5 does not
    expect(compareOutput('y', f32([0]), Tensor.from('float32', [1], [0.00001]))).toBeUndefined();
    expect(compareOutput('y', f32([0]), Tensor.from('float32', [1], [0.00002]))).toBeDefined();
  });

  test('NaN matches NaN and infinities match their own sign', () => {
    expect(compareOutput('y', f32([NaN, Infinity, -Infinity]), Tensor.from('float32', [3], [NaN, Infinity, -Infinity]))).toBeUndefined();
    expect(compareOutput('y', f32([Infinity]), Tensor.from('float32', [1], [-Infinity]))).toBeDefined();
    expect(compareOutput('y', f32([1]), Tensor.from('float32', [1], [NaN]))).toBeDefined();
  });

  test('integers compare exactly, int64 expectations by their exact value', () => {
    const want = { tensor: Tensor.from('int32', [2], [1, 2 ** 31 - 1]), exact: Float64Array.from([1, 2 ** 40]), float: false };
    expect(compareOutput('y', want, Tensor.from('int32', [2], [1, 2 ** 31 - 1]))).toContain('expected 1099511627776');
    expect(compareOutput('y', { tensor: Tensor.from('int32', [1], [3]), float: false }, Tensor.from('int32', [1], [3]))).toBeUndefined();
  });

  test('shapes must agree', () => {
    expect(compareOutput('y', f32([1, 2]), Tensor.from('float32', [2, 1], [1, 2]))).toContain('shape [2,1], expected [2]');
  });
});

describe('runConformanceTest', () => {
  let root: string;
  beforeAll(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-conformance-'));
  });
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  /** A test folder: y = op(x) for x f32[3] with a symbolic dim, one data set. */
  function makeTest(name: string, op: string, x: number[], y: number[], yType = T.FLOAT, yDims = [y.length]): string {
    const dir = path.join(root, name);
    fs.mkdirSync(path.join(dir, 'test_data_set_0'), { recursive: true });
    fs.writeFileSync(
      path.join(dir, 'model.onnx'),
      onnxTesting.makeModel({
        nodes: [{ op, inputs: ['x'], outputs: ['y'] }],
        inputs: [{ name: 'x', type: T.FLOAT, shape: ['n'] }],
        outputs: [{ name: 'y', type: yType }],
      }),
    );
    fs.writeFileSync(path.join(dir, 'test_data_set_0', 'input_0.pb'), encodeTensor(onnxTesting.tensor('x', T.FLOAT, [x.length], x)));
    fs.writeFileSync(path.join(dir, 'test_data_set_0', 'output_0.pb'), encodeTensor(onnxTesting.tensor('y', yType, yDims, y)));
    return dir;
  }

  test('a matching test passes, taking the symbolic size from its data', () => {
    const r = runConformanceTest(makeTest('test_neg', 'Neg', [1, -2, 3], [-1, 2, -3]));
    expect(r).toMatchObject({ name: 'test_neg', status: 'passed', ops: ['Neg'], opset: 17 });
  });

  test('a wrong value fails with the first mismatch', () => {
    const r = runConformanceTest(makeTest('test_abs_wrong', 'Abs', [1, -2, 3], [1, 2, 4]));
    expect(r.status).toBe('failed');
    expect(r.reason).toBe(`test_data_set_0: output 'y': 1 of 3 values differ; first at index 2: got 3, expected 4`);
  });

  test('an op without a mapping is unsupported, not failed', () => {
    const r = runConformanceTest(makeTest('test_det', 'StringNormalizer', [1], [1]));
    expect(r.status).toBe('unsupported');
    expect(r.reason).toContain('unsupported ops found');
    const rep = summarize(root, [r]);
    expect(rep.counts).toMatchObject({ total: 1, unsupported: 1, passed: 0, failed: 0 });
    expect(rep.byOp['StringNormalizer']).toEqual({ tests: 1, passed: 0, failed: 0, unsupported: 1 });
  });

  test('a data-dependent output size is bounded by the size of the expected output', () => {
    // NonZero of [0, 2, 0, 5]: positions 1 and 3, as a [1, 2] int64 tensor
    const r = runConformanceTest(makeTest('test_nonzero_bounded', 'NonZero', [0, 2, 0, 5], [1, 3], T.INT64, [1, 2]));
    expect(r).toMatchObject({ status: 'passed', boundedOutputs: ['y'] });
    expect(summarize(root, [r]).counts.boundedOutputs).toBe(1);
  });
});
