import wabtInit from 'wabt';
import { CustomOpSpec, CustomShapeFunction, registerCustomOp } from '../custom/registry.js';
import { DiagnosticError } from '../diagnostics.js';
import { GraphBuilder } from '../builder.js';
import { fileLoc } from '../location.js';
import { Tensor } from '../tensor.js';
import { printGraph, parseGraph } from '../text/index.js';
import { custom } from './custom.js';

/** Registration checks and the IR op `custom`: inference, reference kernel, gradient rule, text form. */

let wabt: Awaited<ReturnType<typeof wabtInit>>;
beforeAll(async () => {
  wabt = await wabtInit();
});
const wasm = (wat: string) => new Uint8Array(wabt.parseWat('t.wat', wat).toBinary({}).buffer);

/** scaled_add(a, b; s) = a + s·b, element by element: (a, b, out, n_a, n_b, n_out, s) -> () */
const SCALED_ADD_WAT = `(module (import "env" "memory" (memory 1 16))
  (func (export "scaled_add") (param $a i32) (param $b i32) (param $o i32) (param i32 i32) (param $n i32) (param $s f32) (local $i i32) (local $off i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $off (i32.shl (local.get $i) (i32.const 2)))
      (f32.store (i32.add (local.get $o) (local.get $off))
        (f32.add (f32.load (i32.add (local.get $a) (local.get $off))) (f32.mul (local.get $s) (f32.load (i32.add (local.get $b) (local.get $off))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))))`;
const CODELET = `#include <poplar/Vertex.hpp>
class ScaledAdd : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<float>> a, b;
  poplar::Output<poplar::Vector<float>> out;
  float scale;
  bool compute() { for (unsigned i = 0; i < out.size(); ++i) out[i] = a[i] + scale * b[i]; return true; }
};`;

const GRADIENT: CustomOpSpec['gradient'] = ({ b, outputGrads, attrs }) => [outputGrads[0], b.op('mul', [outputGrads[0]!, b.scalar('float32', attrs['scale']!)])];

const SAME_TYPE: CustomShapeFunction = ([a]) => [a!];

function spec(over: Partial<CustomOpSpec> = {}): CustomOpSpec {
  return {
    name: 'scaled_add',
    domain: 'test.ops',
    inputs: ['a', 'b'],
    attributes: [{ name: 'scale', type: 'float', default: 1 }],
    outputs: { count: 1, infer: SAME_TYPE },
    codelet: { source: CODELET, vertex: 'ScaledAdd', outputs: ['out'] },
    reference: { wasm: wasm(SCALED_ADD_WAT), entry: 'scaled_add' },
    gradient: GRADIENT,
    ...over,
  };
}

function registrationError(s: CustomOpSpec): string {
  try {
    registerCustomOp(s, fileLoc('ops.ts', 3, 1));
  } catch (e) {
    if (e instanceof DiagnosticError) return e.diagnostics.map((d) => d.message).join('\n');
    throw e;
  }
  return 'registered';
}

beforeAll(() => {
  registerCustomOp(spec());
});

test('registering the same op again is a no-op; a different one under its name is refused', () => {
  expect(registrationError(spec())).toBe('registered');
  expect(registrationError(spec({ reference: { wasm: wasm(SCALED_ADD_WAT), entry: 'scaled_add', stepBudget: 5 } }))).toBe(
    "custom op 'test.ops::scaled_add' (version 1): is registered already",
  );
});

test('registrations are checked: codelet, fields, outputs, module', () => {
  const named = (over: Partial<CustomOpSpec>) => registrationError(spec({ name: 'bad', ...over }));
  expect(named({ codelet: { source: CODELET, vertex: 'Other', outputs: ['out'] } })).toBe("custom op 'test.ops::bad' (version 1): codelet source does not define class 'Other'");
  expect(named({ codelet: { source: `#include <vector>\n${CODELET}`, vertex: 'ScaledAdd', outputs: ['out'], file: 'k.cpp' } })).toBe(
    "custom op 'test.ops::bad' (version 1): codelet source (k.cpp) includes '#include <vector>'",
  );
  expect(named({ codelet: { source: CODELET, vertex: 'ScaledAdd', outputs: ['result'] } })).toBe("custom op 'test.ops::bad' (version 1): codelet source has no field 'result' for vertex 'ScaledAdd'");
  expect(named({ codelet: { source: CODELET, vertex: 'ScaledAdd' } })).toBe("custom op 'test.ops::bad' (version 1): codelet source has no field 'out0' for vertex 'ScaledAdd'");
  expect(named({ gradiant: 'x' } as Partial<CustomOpSpec>)).toBe(
    "custom op 'test.ops::bad' (version 1): the registration has no setting 'gradiant' (settings: name, domain, domainVersion, inputs, attributes, outputs, codelet, reference, gradient)",
  );
  expect(named({ reference: { wasm: new Uint8Array(), entry: 'k', budget: 3 } as CustomOpSpec['reference'] })).toBe(
    "custom op 'test.ops::bad' (version 1): reference has no setting 'budget' (settings: wasm, file, entry, stepBudget)",
  );
  expect(named({ outputs: [{ dtype: 'int32', shape: [2] }] })).toBe("custom op 'test.ops::bad' (version 1): output type i32[2] is not float32 (custom ops take and make float32 tensors)");
  expect(named({ attributes: [{ name: 'scale', type: 'int' }] })).toBe(
    "custom op 'test.ops::bad' (version 1): reference module exports 'scaled_add' with signature (i32, i32, i32, i32, i32, i32, f32) -> (), but the kernel must take (i32, i32, i32, i32, i32, i32, i32) -> ()",
  );
  expect(named({ reference: { wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 99]), entry: 'k', file: 'k.wasm' } })).toMatch(/^custom op 'test.ops::bad' \(version 1\): reference module k.wasm is not a valid WebAssembly module/);
});

test('inference, reference kernel and gradient follow the registration', () => {
  const b = new GraphBuilder('g');
  const x = b.input('x', 'float32', [3]);
  const y = b.input('y', 'float32', [3]);
  const op = b.addOp('custom', [x, y], { name: 'scaled_add', domain: 'test.ops', attributes: [0.5] });
  expect(op.result.type).toEqual({ dtype: 'float32', shape: [3] });
  const out = custom.kernel([Tensor.from('float32', [3], [1, 2, 3]), Tensor.from('float32', [3], [4, -2, 1])], op.attrs, { seed: 0, step: 0, print: () => {} });
  expect(Array.from(out[0]!.data)).toEqual([3, 1, 3.5]);
  // the registration's gradient function: d/da = g, d/db = scale·g
  const g = b.input('g', 'float32', [3]);
  const rule = custom.grad as Exclude<typeof custom.grad, 'none' | undefined>;
  const [ga, gb] = rule({ b, op, inputs: [x, y], outputs: op.results, outputGrads: [g] });
  expect(ga).toBe(g);
  expect(gb!.producer.kind).toBe('mul');
  // the text form names the registration and round-trips
  const text = printGraph(b.graph);
  expect(text).toContain('custom(%x, %y) {name = "scaled_add", domain = "test.ops", attributes = [0.5]}');
  expect(printGraph(parseGraph(text))).toBe(text);
});

test('misuse gets a message naming the custom op', () => {
  const b = new GraphBuilder('g');
  const x = b.input('x', 'float32', [3]);
  const i = b.input('i', 'int32', [3]);
  const msg = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      return (e as DiagnosticError).diagnostics[0]!.message;
    }
    return 'no error';
  };
  expect(msg(() => b.op('custom', [x], { name: 'nope' }))).toBe("custom: no custom op 'custom.ops::nope' (version 1) is registered; register it first (registerCustomOp)");
  expect(msg(() => b.op('custom', [x], { name: 'scaled_add' }))).toBe(
    "custom: no custom op 'custom.ops::scaled_add' (version 1) is registered (registered: 'test.ops::scaled_add' (version 1)); register it first (registerCustomOp)",
  );
  expect(msg(() => b.op('custom', [x], { name: 'scaled_add', domain: 'test.ops', attributes: [1] }))).toBe("custom: custom op 'test.ops::scaled_add' (version 1) takes 2 inputs (a, b), got 1");
  expect(msg(() => b.op('custom', [x, i], { name: 'scaled_add', domain: 'test.ops', attributes: [1] }))).toBe(
    "custom: custom op 'test.ops::scaled_add' (version 1): input 'b' is i32[3]; custom ops take float32 tensors (insert a cast)",
  );
  expect(msg(() => b.op('custom', [x, x], { name: 'scaled_add', domain: 'test.ops' }))).toBe("custom: custom op 'test.ops::scaled_add' (version 1) takes 1 attribute value (scale), got 0");
});

test('a kernel over its step budget and an op without a gradient are reported by name', () => {
  registerCustomOp({
    name: 'spin',
    inputs: ['x'],
    outputs: [{ dtype: 'float32', shape: [2] }],
    codelet: { source: 'class Spin : public poplar::Vertex { public: poplar::Input<poplar::Vector<float>> x; poplar::Output<poplar::Vector<float>> out0; bool compute() { return true; } };', vertex: 'Spin' },
    reference: { wasm: wasm('(module (memory (export "memory") 1 1) (func (export "spin") (param i32 i32 i32 i32) (loop $l (br $l))))'), entry: 'spin', stepBudget: 1000 },
  });
  const b = new GraphBuilder('g');
  const x = b.input('x', 'float32', [2]);
  b.loc = fileLoc('model.tg', 4, 2);
  const op = b.addOp('custom', [x], { name: 'spin' });
  expect(() => custom.kernel([Tensor.from('float32', [2], [1, 2])], op.attrs, { seed: 0, step: 0, print: () => {} })).toThrow(
    "the reference kernel of custom op 'custom.ops::spin' (version 1) exceeded its step budget of 1000 instructions",
  );
  const rule = custom.grad as Exclude<typeof custom.grad, 'none' | undefined>;
  expect(() => rule({ b, op, inputs: [x], outputs: op.results, outputGrads: [x] })).toThrow("custom op 'custom.ops::spin' (version 1) has no gradient");
});

test('a gradient function that throws, and module bytes of the wrong kind, are diagnostics', () => {
  const broken: CustomOpSpec['gradient'] = () => {
    throw new TypeError('oops');
  };
  registerCustomOp(spec({ name: 'broken_grad', gradient: broken }));
  const b = new GraphBuilder('g');
  const x = b.input('x', 'float32', [3]);
  const op = b.addOp('custom', [x, x], { name: 'broken_grad', domain: 'test.ops', attributes: [1] });
  const rule = custom.grad as Exclude<typeof custom.grad, 'none' | undefined>;
  expect(() => rule({ b, op, inputs: [x, x], outputs: op.results, outputGrads: [x] })).toThrow("the gradient function of custom op 'test.ops::broken_grad' (version 1) failed: oops");
  const bytes = new ArrayBuffer(8) as unknown as Uint8Array;
  expect(registrationError(spec({ name: 'bytes', reference: { wasm: bytes, entry: 'k' } }))).toBe("custom op 'test.ops::bytes' (version 1): reference must give the module's bytes (a Uint8Array) and the name of its entry point (reference.wasm, reference.entry)");
});
