import wabtInit from 'wabt';
import { GraphBuilder, Module, execute, registerCustomOp, repeat, seq, streamIn } from '@tilegraph/ir';
import { generatePoplar } from '../generate.js';

/** The code a custom op lowers to: its codelet in a namespace of its own, one vertex, attributes as initial values. */

test('a custom op with a float and an int attribute', async () => {
  const wabt = await wabtInit();
  const wasm = wabt.parseWat('k.wat', '(module (memory (export "memory") 1 1) (func (export "k") (param i32 i32 i32 i32 f32 i32)))').toBinary({}).buffer;
  registerCustomOp({
    name: 'shift',
    inputs: ['x'],
    attributes: [
      { name: 'by', type: 'float' },
      { name: 'times', type: 'int', default: 2 },
    ],
    outputs: [{ dtype: 'float32', shape: [6] }],
    codelet: {
      source: '#include <cmath>\nclass Shift : public poplar::Vertex {\npublic:\n  poplar::Input<poplar::Vector<float>> in;\n  poplar::Output<poplar::Vector<float>> out;\n  float offset;\n  int count;\n  bool compute() { return true; }\n};\n',
      vertex: 'Shift',
      inputs: ['in'],
      outputs: ['out'],
      attributes: ['offset', 'count'],
    },
    reference: { wasm: new Uint8Array(wasm), entry: 'k' },
  });
  const b = new GraphBuilder('g');
  const x = b.input('x', 'float32', [2, 3]);
  b.output('y', b.op('custom', [x], { name: 'shift', attributes: [0.1, 3] }));
  const m: Module = { name: 'm', graphs: new Map([['g', b.graph]]), program: repeat(1, seq(streamIn(['x']), execute('g'))), replicationFactor: 1, variables: new Map() };
  const { files, plan } = generatePoplar(m);
  const codelets = files['codelets.cpp']!;
  const host = files['host.cpp']!;
  // the include codelets.cpp makes already is dropped; the class keeps its name in its namespace
  expect(codelets).toContain('namespace Custom0 {\nclass Shift : public poplar::Vertex {');
  expect(codelets.match(/#include <cmath>/g)).toHaveLength(1);
  expect(plan.vertices).toContain('tg::Custom0::Shift');
  expect(host).toMatch(/addVertex\(cs\d+, "tg::Custom0::Shift", \{\{"in", d\.inputs\[0\]\.flatten\(\)\}, \{"out", t\d+\.flatten\(\)\}\}\);/);
  expect(host).toMatch(/setInitialValue\(v\d+\["offset"\], 0\.1f\);/);
  expect(host).toMatch(/setInitialValue\(v\d+\["count"\], 3\);/);
});
