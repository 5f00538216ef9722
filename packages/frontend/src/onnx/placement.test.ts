import { DiagnosticError, Graph, Tensor } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { importOnnx } from './importer.js';
import { IPU_ATTR, PHASE_ATTR, STAGE_ATTR } from './placement.js';
import { ONNX_DTYPE as T } from './proto.js';
import { AttrInit, makeModel, tensor } from './testing.js';

/**
 * PopART's placement attributes (`__ipu_number`, `__pipeline_stage`, `__execution_phase`) become
 * the `ipu`, `stage` and `phase` annotations of every op the node lowers to.
 */

type Attrs = Record<string, AttrInit>;

/** x → Gemm 'fc' (W, b, transB: lowers to transpose, matmul, add) → Relu 'act'. */
function model(fc: Attrs, act: Attrs): Uint8Array {
  return makeModel({
    nodes: [
      { op: 'Gemm', inputs: ['x', 'W', 'b'], outputs: ['h'], name: 'fc', attrs: { transB: 1, ...fc } },
      { op: 'Relu', inputs: ['h'], outputs: ['y'], name: 'act', attrs: act },
    ],
    inputs: [{ name: 'x', type: T.FLOAT, shape: [1, 2] }],
    outputs: [{ name: 'y', type: T.FLOAT, shape: [1, 2] }],
    initializers: [tensor('W', T.FLOAT, [2, 2], [1, 0, -3, 1]), tensor('b', T.FLOAT, [2], [1, -1])],
  });
}

/** "kind {annotations}" of the ops that compute something, by the ONNX node they came from. */
function placedOps(g: Graph): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const op of g.ops) {
    if (op.operands.length === 0) continue;
    const node = op.loc.frames[0]?.name ?? '?';
    (out[node] ??= []).push(`${op.kind} ${JSON.stringify(op.annotations)}`);
  }
  return out;
}

function importError(bytes: Uint8Array): string {
  try {
    importOnnx(bytes);
  } catch (e) {
    expect(e).toBeInstanceOf(DiagnosticError);
    return (e as DiagnosticError).diagnostics.map((d) => `${d.message}${d.notes ? ` [${d.notes.join('; ')}]` : ''}`).join('\n');
  }
  throw new Error('the import succeeded');
}

describe('ONNX placement attributes', () => {
  test('__ipu_number and __pipeline_stage put every op of a node on its IPU and stage', () => {
    const { graph, diagnostics } = importOnnx(model({ [IPU_ATTR]: 0, [STAGE_ATTR]: 0 }, { [IPU_ATTR]: 1, [STAGE_ATTR]: 1 }));
    expect(diagnostics).toEqual([]);
    expect(placedOps(graph)).toEqual({
      fc: ['transpose {"ipu":0,"stage":0}', 'matmul {"ipu":0,"stage":0}', 'add {"ipu":0,"stage":0}'],
      act: ['relu {"ipu":1,"stage":1}'],
    });
    // no block is set, and the sources (inputs, parameters) are not placed
    expect(graph.ops.some((o) => o.annotations.block !== undefined)).toBe(false);
    expect(graph.ops.filter((o) => o.kind === 'input' || o.kind === 'parameter').map((o) => o.annotations)).toEqual([{}, {}, {}]);
    // placement does not change what the model computes: relu([1, -1]·Wᵀ + b) = relu([2, -5]) = [2, 0]
    const y = runGraph(graph, { x: Tensor.from('float32', [1, 2], [1, -1]) }).outputs['y']!;
    expect(Array.from(y.data)).toEqual([2, 0]);
  });

  test('__execution_phase becomes the phase annotation, alone or with the others', () => {
    const { graph } = importOnnx(model({ [PHASE_ATTR]: 0 }, { [PHASE_ATTR]: 3, [IPU_ATTR]: 1 }));
    expect(placedOps(graph)).toEqual({
      fc: ['transpose {"phase":0}', 'matmul {"phase":0}', 'add {"phase":0}'],
      act: ['relu {"ipu":1,"phase":3}'],
    });
  });

  test('nodes without the attributes are not placed; the attributes sit beside the recompute mark', () => {
    const { graph } = importOnnx(model({}, { [IPU_ATTR]: 2, __recompute_output_in_backward_pass: 2 }));
    expect(placedOps(graph)).toEqual({
      fc: ['transpose {}', 'matmul {}', 'add {}'],
      act: ['relu {"ipu":2,"recompute":"recompute"}'],
    });
  });

  test('any op type accepts them: a Constant node is not told it has two attributes', () => {
    const bytes = makeModel({
      nodes: [
        { op: 'Constant', inputs: [], outputs: ['k'], name: 'k', attrs: { value: { tensor: tensor('', T.FLOAT, [2], [2, 3]) }, [IPU_ATTR]: 1, [STAGE_ATTR]: 1 } },
        { op: 'Mul', inputs: ['x', 'k'], outputs: ['y'], name: 'scale', attrs: { [IPU_ATTR]: 1, [STAGE_ATTR]: 1 } },
      ],
      inputs: [{ name: 'x', type: T.FLOAT, shape: [2] }],
      outputs: [{ name: 'y', type: T.FLOAT, shape: [2] }],
    });
    const { graph, diagnostics } = importOnnx(bytes);
    expect(diagnostics).toEqual([]);
    expect(graph.ops.filter((o) => o.kind !== 'input').map((o) => `${o.kind} ${JSON.stringify(o.annotations)}`)).toEqual([
      'constant {"ipu":1,"stage":1}',
      'mul {"ipu":1,"stage":1}',
    ]);
    expect(Array.from(runGraph(graph, { x: Tensor.from('float32', [2], [1, 2]) }).outputs['y']!.data)).toEqual([2, 6]);
  });

  test('nodes of a subgraph take the placement of the node around them unless they carry their own', () => {
    // Loop M=2 times: acc = (acc + x) * x, the Mul placed on IPU 2 by its own attribute
    const body = {
      name: 'body',
      node: [
        { opType: 'Add', input: ['acc_in', 'x'], output: ['s'], name: 'add' },
        { opType: 'Mul', input: ['s', 'x'], output: ['acc_out'], name: 'mul', attribute: [{ name: IPU_ATTR, type: 2, i: 2 }] },
        { opType: 'Identity', input: ['cond_in'], output: ['cond_out'] },
      ],
      input: [{ name: 'i' }, { name: 'cond_in' }, { name: 'acc_in' }],
      output: [{ name: 'cond_out' }, { name: 'acc_out' }],
    };
    const bytes = makeModel({
      nodes: [{ op: 'Loop', inputs: ['M', '', 'zero'], outputs: ['acc'], name: 'loop', attrs: { body: { graph: body }, [IPU_ATTR]: 1, [STAGE_ATTR]: 0 } }],
      inputs: [{ name: 'x', type: T.FLOAT, shape: [2] }],
      outputs: [{ name: 'acc', type: T.FLOAT }],
      initializers: [tensor('M', T.INT64, [], [2]), tensor('zero', T.FLOAT, [2], [0, 0])],
    });
    const { graph } = importOnnx(bytes);
    const computing = graph.ops.filter((o) => o.operands.length > 0);
    expect(computing.map((o) => `${o.kind} ${JSON.stringify(o.annotations)}`)).toEqual([
      'add {"ipu":1,"stage":0}',
      'mul {"ipu":2,"stage":0}',
      'add {"ipu":1,"stage":0}',
      'mul {"ipu":2,"stage":0}',
    ]);
    // x = [1, 2]: ((0 + x)·x + x)·x = [2, 12]
    expect(Array.from(runGraph(graph, { x: Tensor.from('float32', [2], [1, 2]) }).outputs['acc']!.data)).toEqual([2, 12]);
  });

  test('a value that is not a non-negative integer is an error naming the node, the attribute and the value', () => {
    expect(importError(model({}, { [IPU_ATTR]: -1 }))).toBe(
      `Relu node 'act': ${IPU_ATTR} is -1; it must be a non-negative integer (the IPU (virtual graph) the node runs on) [PopART writes it with Builder.virtualGraph]`,
    );
    expect(importError(model({ [STAGE_ATTR]: 1.5 }, {}))).toBe(
      `Gemm node 'fc': ${STAGE_ATTR} is 1.5 (a float); it must be a non-negative integer (the pipeline stage of the node) [PopART writes it with Builder.pipelineStage]`,
    );
    expect(importError(model({}, { [PHASE_ATTR]: 'first' }))).toMatch(new RegExp(`^Relu node 'act': ${PHASE_ATTR} is 'first' \\(a string\\); it must be a non-negative integer`));
    expect(importError(model({}, { [IPU_ATTR]: [0, 1] }))).toMatch(new RegExp(`^Relu node 'act': ${IPU_ATTR} is \\[0, 1\\] \\(a list of ints\\); it must be a non-negative integer`));
  });
});
