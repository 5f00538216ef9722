import { ModelBuilder, OnnxUnsupportedError, compileModelSource, encodeModel, importOnnx, onnxTesting, registerCustomOp } from '@tilegraph/frontend';
import { ONNX_DTYPE } from '@tilegraph/frontend';
import { DiagnosticError, Tensor } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { registerLeakyRelu } from './support/custom-ops.js';

/** Custom ops reached from the model language, the TypeScript API and ONNX custom-domain nodes. */

beforeAll(registerLeakyRelu);

const X = [2, -2, 0.5, -1];
/** leaky_relu in float32, as the kernel computes it. */
const leaky = (alpha: number) => X.map((v) => (v > 0 ? v : Math.fround(Math.fround(alpha) * v)));

function message(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  return 'no error';
}

test('model language: custom_op("name", inputs..., attributes by name)', () => {
  const g = compileModelSource('model m {\n  input x: f32[4]\n  output y = custom_op("leaky_relu", x, alpha=0.25)\n  output z = custom_op("leaky_relu", x)\n}\n', 'm.tg');
  const out = runGraph(g, { x: Tensor.from('float32', [4], X) }).outputs;
  expect(Array.from(out['y']!.data)).toEqual(leaky(0.25));
  expect(Array.from(out['z']!.data)).toEqual(leaky(0.01));
});

test('model language: mistakes point at the call', () => {
  const compile = (line: string) => message(() => compileModelSource(`model m {\n  input x: f32[4]\n  output y = ${line}\n}\n`, 'm.tg'));
  expect(compile('custom_op("leaky", x)')).toContain("m.tg:3:14: error: no custom op 'custom.ops::leaky' (version 1) is registered; register it first (registerCustomOp)");
  expect(compile('custom_op("leaky_relu", x, beta=1)')).toContain("m.tg:3:14: error: custom op 'custom.ops::leaky_relu' (version 1) has no attribute 'beta' (attributes: alpha)");
  expect(compile('custom_op("leaky_relu", x, alpha="a")')).toContain("m.tg:3:41: error: custom_op: attribute 'alpha' must be a number, got the string \"a\"");
  expect(compile('custom_op(x)')).toContain("error: custom_op needs the op's name as its first argument (a string)");
  expect(compile('custom_op("leaky_relu", x, x)')).toContain("custom op 'custom.ops::leaky_relu' (version 1) takes 1 input (x), got 2");
});

test('TypeScript API: ModelBuilder.customOp, and registration problems as diagnostics', () => {
  const m = new ModelBuilder('m');
  const x = m.input('x', 'float32', [4]);
  m.output('y', m.customOp('leaky_relu', [x], { alpha: 0.5 })[0]!);
  expect(Array.from(runGraph(m.graph, { x: Tensor.from('float32', [4], X) }).outputs['y']!.data)).toEqual(leaky(0.5));
  expect(message(() => m.customOp('leaky_relu', [x], { alpha: 0.5 }, { domainVersion: 2 }))).toMatch(/no custom op 'custom.ops::leaky_relu' \(version 2\) is registered/);
  const missing = message(() =>
    registerCustomOp({ name: 'm', inputs: ['x'], outputs: [{ dtype: 'float32', shape: [1] }], codelet: { file: 'nope.cpp', vertex: 'V' }, reference: { file: 'nope.wasm', entry: 'k' }, baseDir: '/nonexistent' }),
  );
  expect(missing).toMatch(/^\/.*custom-op-frontends.test.ts:\d+:\d+: error: cannot read the codelet of custom op 'm' '\/nonexistent\/nope.cpp': ENOENT/);
  const both = () => registerCustomOp({ name: 'm', inputs: ['x'], outputs: [{ dtype: 'float32', shape: [1] }], codelet: { source: 'x', file: 'y', vertex: 'V' }, reference: { file: 'k', entry: 'k' } });
  expect(both).toThrow(DiagnosticError);
  expect(message(both)).toContain("custom op 'm': give its codelet (codelet.source or codelet.file) either inline or as a file, not both");
});

function onnxModel(domainVersion: number | undefined, attrs: Record<string, onnxTesting.AttrInit>): Uint8Array {
  const proto = onnxTesting.modelProto({
    nodes: [{ op: 'leaky_relu', domain: 'custom.ops', inputs: ['x'], outputs: ['y'], name: 'act', attrs }],
    inputs: [{ name: 'x', type: ONNX_DTYPE.FLOAT, shape: [4] }],
    outputs: [{ name: 'y', type: ONNX_DTYPE.FLOAT, shape: [4] }],
  });
  if (domainVersion !== undefined) proto.opsetImport!.push({ domain: 'custom.ops', version: domainVersion });
  return encodeModel(proto);
}

test('ONNX: a node of a custom domain maps to the registered custom op (PopART custom ops)', () => {
  const { graph } = importOnnx(onnxModel(1, { alpha: { float: 0.3 }, __ipu_number: 0 }), { file: 'm.onnx' });
  expect(graph.ops.filter((o) => o.kind === 'custom').map((o) => o.attrs['name'])).toEqual(['leaky_relu']);
  expect(Array.from(runGraph(graph, { x: Tensor.from('float32', [4], X) }).outputs['y']!.data)).toEqual(leaky(0.3));
  // no opset_import for the domain: the highest registered version
  expect(importOnnx(onnxModel(undefined, {}), { file: 'm.onnx' }).graph.ops.some((o) => o.kind === 'custom')).toBe(true);
});

test('ONNX: an unregistered version or an unknown attribute is reported', () => {
  const v2 = () => importOnnx(onnxModel(2, {}), { file: 'm.onnx' });
  expect(v2).toThrow(OnnxUnsupportedError);
  expect(message(v2)).toContain("unsupported ops found in model (opset 17): custom.ops.leaky_relu ('act')");
  expect(message(() => importOnnx(onnxModel(1, { beta: 2 }), { file: 'm.onnx' }))).toContain(
    "leaky_relu node 'act': custom op 'custom.ops::leaky_relu' (version 1) has no attribute 'beta' (attributes: alpha)",
  );
});

test('a reference kernel over its step budget is reported at the op that ran it', async () => {
  const wabt = await (await import('wabt')).default();
  const spin = wabt.parseWat('spin.wat', '(module (memory (export "memory") 1 1) (func (export "spin") (param i32 i32 i32 i32) (loop $l (br $l))))');
  registerCustomOp({
    name: 'spin',
    inputs: ['x'],
    outputs: [{ dtype: 'float32', shape: [4] }],
    codelet: { source: 'class Spin : public poplar::Vertex { public: poplar::Input<poplar::Vector<float>> x; poplar::Output<poplar::Vector<float>> out0; bool compute() { return true; } };', vertex: 'Spin' },
    reference: { wasm: new Uint8Array(spin.toBinary({}).buffer), entry: 'spin', stepBudget: 1000 },
  });
  const g = compileModelSource('model m {\n  input x: f32[4]\n  output y = custom_op("spin", x)\n}\n', 'm.tg');
  expect(message(() => runGraph(g, { x: Tensor.from('float32', [4], X) }))).toContain(
    "m.tg:3:14: error: the reference kernel of custom op 'custom.ops::spin' (version 1) exceeded its step budget of 1000 instructions",
  );
  // an ONNX node with constant inputs runs the kernel at import: the message names the node
  const proto = onnxTesting.modelProto({
    nodes: [
      { op: 'Constant', inputs: [], outputs: ['c'], attrs: { value: { tensor: onnxTesting.tensor('c', ONNX_DTYPE.FLOAT, [4], [1, 2, 3, 4]) } } },
      { op: 'spin', domain: 'custom.ops', inputs: ['c'], outputs: ['y'], name: 'loop' },
    ],
    inputs: [],
    outputs: [{ name: 'y', type: ONNX_DTYPE.FLOAT, shape: [4] }],
  });
  expect(message(() => importOnnx(encodeModel(proto), { file: 'm.onnx' }))).toContain(
    "spin node 'loop': the reference kernel of custom op 'custom.ops::spin' (version 1) exceeded its step budget of 1000 instructions",
  );
});
