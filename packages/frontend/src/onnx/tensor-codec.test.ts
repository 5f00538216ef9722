import { DType, DiagnosticError, Graph, Tensor } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { importOnnx } from './importer.js';
import { ONNX_DTYPE as T, TensorProto } from './proto.js';
import { packCodes, tensorToProto, unpackCodes } from './tensor-codec.js';
import { tensorFromProto } from './tensor.js';
import { makeModel } from './testing.js';

const decode = (p: TensorProto) => tensorFromProto(p, 'test tensor').tensor;
const run = (g: Graph, feeds: Record<string, Tensor>) => runGraph(g, feeds, { print: () => {} }).outputs;

describe('ONNX packed and coded tensor data', () => {
  it('reads int4 packed two per byte, low nibble first', () => {
    // 1 → 0x1, -2 → 0xe, 7 → 0x7: bytes 0xe1 and 0x07 (the last high nibble unused)
    const raw = { name: 'q', dataType: T.INT4, dims: [3], rawData: Uint8Array.of(0xe1, 0x07) };
    const t = decode(raw);
    expect(t.dtype).toBe('int4');
    expect(Array.from(t.data)).toEqual([1, -2, 7]);
    // int32_data holds one packed byte per entry
    expect(Array.from(decode({ name: 'q', dataType: T.INT4, dims: [3], int32Data: [0xe1, 0x07] }).data)).toEqual([1, -2, 7]);
    expect(Array.from(decode({ name: 'q', dataType: T.UINT4, dims: [3], rawData: Uint8Array.of(0xe1, 0x07) }).data)).toEqual([1, 14, 7]);
  });
  it('reads 2-bit types four per byte and 8/16-bit codes as they are', () => {
    // 0, 1, 2, 3 | 3: 0b11_10_01_00 = 0xe4, then 0x03
    expect(Array.from(decode({ name: 'u', dataType: T.UINT2, dims: [5], rawData: Uint8Array.of(0xe4, 0x03) }).data)).toEqual([0, 1, 2, 3, 3]);
    expect(Array.from(decode({ name: 'i', dataType: T.INT2, dims: [5], rawData: Uint8Array.of(0xe4, 0x03) }).data)).toEqual([0, 1, -2, -1, -1]);
    expect(Array.from(decode({ name: 'b', dataType: T.BFLOAT16, dims: [2], rawData: Uint8Array.of(0x80, 0x3f, 0x00, 0xc0) }).data)).toEqual([1, -2]);
    const f8 = decode({ name: 'f', dataType: T.FLOAT8E4M3FN, dims: [3], rawData: Uint8Array.of(0x7e, 0x7f, 0x38) });
    expect(f8.dtype).toBe('float8e4m3fn');
    expect(Array.from(f8.data)).toEqual([448, NaN, 1]);
    expect(Array.from(decode({ name: 'i', dataType: T.INT8, dims: [2], rawData: Uint8Array.of(0xff, 0x80) }).data)).toEqual([-1, -128]);
  });
  it('reports packed data of the wrong length', () => {
    expect(() => decode({ name: 'q', dataType: T.INT4, dims: [3], rawData: Uint8Array.of(0xe1) })).toThrow(/raw data has 1 bytes but shape \[3\] of INT4 needs 2/);
    expect(() => decode({ name: 'q', dataType: T.INT4, dims: [3], int32Data: [1, 2, 3] })).toThrow(/3 values in int32_data but shape \[3\] needs 2/);
  });
  it('writes what it reads', () => {
    expect(Array.from(tensorToProto(Tensor.from('int4', [3], [1, -2, 7]), 'q').rawData!)).toEqual([0xe1, 0x07]);
    const cases: [DType, number[]][] = [
      ['int8', [-128, 5, 127]],
      ['uint16', [0, 65535, 7]],
      ['uint2', [3, 0, 1, 2, 3]],
      ['bfloat16', [0.1, -0, Infinity]],
      ['float8e5m2', [57344, -Infinity, 0.3]],
      ['float8e4m3fnuz', [240, NaN, -1]],
      ['float8e8m0', [1, 2 ** -127, 4]],
      ['float4e2m1', [6, -0.5, 0]],
      ['float16', [0.1, 65504, -2]],
      ['float32', [0.1, -3, 1e30]],
    ];
    for (const [dtype, values] of cases) {
      const t = Tensor.from(dtype, [values.length], values);
      const back = decode(tensorToProto(t, 'x'));
      expect(back.dtype).toBe(dtype);
      expect(Array.from(back.data)).toEqual(Array.from(t.data));
    }
  });
  it('packs and unpacks codes', () => {
    expect(Array.from(packCodes([1, 2, 3, 0, 1], 2))).toEqual([0b00_11_10_01, 0b01]);
    expect(Array.from(unpackCodes(Uint8Array.of(0x21, 0x43), 4, 4))).toEqual([1, 2, 3, 4]);
  });
});

describe('importing models with narrow types', () => {
  it('casts float to int4 wrapping, and back', () => {
    const bytes = makeModel({
      opset: 21,
      nodes: [
        { op: 'Cast', inputs: ['x'], outputs: ['q'], attrs: { to: T.INT4 } },
        { op: 'Cast', inputs: ['q'], outputs: ['y'], attrs: { to: T.FLOAT } },
      ],
      inputs: [{ name: 'x', type: T.FLOAT, shape: [5] }],
      outputs: [{ name: 'y', type: T.FLOAT }],
    });
    const { graph } = importOnnx(bytes);
    const y = run(graph, { x: Tensor.from('float32', [5], [-9, 8, 7.9, -8.5, 15]) })['y']!;
    // truncated toward zero, then wrapped to [-8, 7]: -9 → 7, 8 → -8, 7 → 7, -8 → -8, 15 → -1
    expect(Array.from(y.data)).toEqual([7, -8, 7, -8, -1]);
  });
  it('honours saturate = 0 on a cast to float8 and warns where it has no effect', () => {
    const model = (to: number) =>
      makeModel({
        opset: 21,
        nodes: [{ op: 'Cast', inputs: ['x'], outputs: ['y'], name: 'c', attrs: { to, saturate: 0 } }],
        inputs: [{ name: 'x', type: T.FLOAT, shape: [2] }],
        outputs: [{ name: 'y', type: to }],
      });
    const f8 = importOnnx(model(T.FLOAT8E4M3FN));
    const y = run(f8.graph, { x: Tensor.from('float32', [2], [500, 0.3]) })['y']!;
    expect(Array.from(y.data)).toEqual([NaN, 0.3125]);
    const i8 = importOnnx(model(T.INT8));
    expect(i8.diagnostics.map((d) => d.message).join('\n')).toMatch(/saturate = 0 has no effect: the cast is to int8/);
  });
  it('refuses complex data with a diagnostic', () => {
    let err: unknown;
    try {
      decode({ name: 'c', dataType: T.COMPLEX64, dims: [1], rawData: new Uint8Array(8) });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DiagnosticError);
    expect((err as Error).message).toMatch(/test tensor has data type COMPLEX64, which the IR does not support/);
  });
});
