import { Options, compileModelSourceFull } from '@tilegraph/frontend';
import { Diagnostic, DiagnosticError, Graph, GraphBuilder, SerializeSettings, Tensor, parseGraph, renderDiagnostic } from '@tilegraph/ir';
import { DEFAULT_STEP, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { inferenceModel, trainingModel } from '../support/reference.js';

/**
 * serialize-matmul's diagnostics: a factor that does not divide the split dimension is an error
 * at the serialized_matmul call; a setting that changes nothing is one warning at the call, in
 * inference and in training (where the backward matmuls carry the same setting), and sessions
 * pass the warnings on.
 */

const SGD = makeOptimizer('SGD', { lr: 0.1 });

/** A model around one serialized_matmul call (line 5 of m.tg). */
function model(call: string, dtype = 'f32'): { graph: Graph; sources: (f: string) => string | undefined } {
  const src = [
    'model m {',
    `  input x: ${dtype}[6, 4]`,
    `  input t: ${dtype}[6, 3]`,
    `  param w: ${dtype}[4, 3] = ones()`,
    `  let y = ${call}`,
    '  output pred = y',
    '  loss = (y - t) * (y - t)',
    '}',
    '',
  ].join('\n');
  const c = compileModelSourceFull(src, 'm.tg');
  return { graph: c.graph, sources: c.sources };
}
const CALL_COL = '  let y = '.length + 1;

function thrown(f: () => unknown): DiagnosticError {
  try {
    f();
  } catch (e) {
    if (e instanceof DiagnosticError) return e;
    throw e;
  }
  throw new Error('no error');
}

/** The warning for a split matmul of `bytes` bytes, too small to save memory (the models here are). */
const TINY = (bytes: number) =>
  `serialized matmul: this matmul is too small for serialisation to save memory: its operands and result are ${bytes} bytes in all, at most the minimum share of each tile whole or split`;

function inferenceWarnings(g: Graph): Diagnostic[] {
  const ds: Diagnostic[] = [];
  buildInferenceModule(g, DEFAULT_STEP, ds);
  return ds;
}

function trainingWarnings(g: Graph): readonly Diagnostic[] {
  return buildTrainingModule(g, DEFAULT_STEP, SGD).diagnostics;
}

describe('a factor that does not divide the split dimension', () => {
  test.each([
    ['input_channels', 4, 'the input channels (dimension M of X[M,K] @ W[K,N]), M = 6, into 4 parts, but 6 is not divisible by 4', '1, 2, 3, 6'],
    ['reducing_dim', 3, 'the reducing dimension (dimension K of X[M,K] @ W[K,N]), K = 4, into 3 parts, but 4 is not divisible by 3', '1, 2, 4'],
    ['output_channels', 2, 'the output channels (dimension N of X[M,K] @ W[K,N]), N = 3, into 2 parts, but 3 is not divisible by 2', '1, 3'],
  ])('%s factor %i: an error at the call naming the dimension, its size and the factor', (mode, factor, what, divisors) => {
    const { graph, sources } = model(`serialized_matmul(x, w, mode="${mode}", factor=${factor})`);
    for (const e of [thrown(() => buildInferenceModule(graph, DEFAULT_STEP)), thrown(() => buildTrainingModule(graph, DEFAULT_STEP, SGD))]) {
      // one error, though in training the two backward matmuls split the same dimension
      expect(e.diagnostics).toHaveLength(1);
      const d = e.diagnostics[0]!;
      expect(d.message).toBe(`serialized matmul: ${mode} splits ${what}`);
      expect(d.loc!.frames[0]).toMatchObject({ file: 'm.tg', line: 5, col: CALL_COL });
      expect(d.notes).toEqual(['the matmul is f32[6,4] @ f32[4,3]', `use a factor that divides ${what.match(/= (\d+)/)![1]}: ${divisors}`]);
      expect(renderDiagnostic(d, { sources })).toContain(`m.tg:5:${CALL_COL}: error: serialized matmul: ${mode} splits`);
    }
  });
});

describe('settings that change nothing are one warning at the call', () => {
  const cases: [string, string, string | undefined, string | undefined][] = [
    ['factor 1', 'serialized_matmul(x, w, mode="reducing_dim", factor=1)', 'serialized matmul: factor 1 leaves the matmul whole', undefined],
    ['mode none with a factor', 'serialized_matmul(x, w, mode="none", factor=4)', 'serialized matmul: mode none leaves the matmul whole; factor 4 has no effect', undefined],
    [
      'mode none with keep_precision',
      'serialized_matmul(x, w, mode="none", factor=2, keep_precision=true)',
      'serialized matmul: mode none leaves the matmul whole; factor 2 and keep_precision have no effect',
      undefined,
    ],
    ['keep_precision on float32', 'serialized_matmul(x, w, mode="reducing_dim", factor=2, keep_precision=true)', 'serialized matmul: keep_precision has no effect on a f32 matmul: it keeps float32 partial sums of float16 operands', undefined],
    [
      // inference concatenates input_channels pieces; training also sums the weight gradient's partials
      'keep_precision without partial sums (inference only)',
      'serialized_matmul(x, w, mode="input_channels", factor=2, keep_precision=true)',
      'serialized matmul: keep_precision has no effect: input_channels adds no partial sums here (its pieces are concatenated)',
      'f16',
    ],
  ];
  test.each(cases)('%s', (_, call, message, dtype) => {
    const { graph } = model(call, dtype ?? 'f32');
    const inference = inferenceWarnings(graph);
    expect(inference.map((d) => d.message)).toEqual([message]);
    expect(inference[0]!.severity).toBe('warning');
    expect(inference[0]!.loc!.frames[0]).toMatchObject({ file: 'm.tg', line: 5, col: CALL_COL });
    expect(trainingWarnings(graph).map((d) => d.message)).toEqual(dtype === 'f16' ? [TINY(108)] : [message]);
  });

  test('mode none with factor 1 is an explicitly plain matmul: no warning', () => {
    const { graph } = model('serialized_matmul(x, w, mode="none", factor=1)');
    expect(inferenceWarnings(graph)).toEqual([]);
    expect(trainingWarnings(graph)).toEqual([]);
  });

  test('keep_precision on float16 in training: the weight gradient of input_channels sums float32 partials', () => {
    const { graph } = model('serialized_matmul(x, w, mode="input_channels", factor=2, keep_precision=true)', 'f16');
    const step = buildTrainingModule(graph, DEFAULT_STEP, SGD).module.graphs.get('step')!;
    const matmuls = step.ops.filter((o) => o.kind === 'matmul');
    // forward and dW split 2 ways (dX is not needed: x is an input); dW's pieces are float32
    expect(matmuls.map((o) => o.result.type.dtype).sort()).toEqual(['float16', 'float16', 'float32', 'float32']);
  });

  test('serialize on an op that is not a matmul (text IR)', () => {
    const g = parseGraph(
      [
        'graph @g {',
        '  %x = input {name = "x"} : f32[4]',
        '  %y = relu(%x) [serialize = input_channels<factor = 2>] : f32[4] loc("g.tgir":2:8)',
        '  output "y" = %y',
        '}',
        '',
      ].join('\n'),
    );
    const ds = inferenceWarnings(g);
    expect(ds.map((d) => d.message)).toEqual(['serialize has no effect on relu: only matmul ops are serialised']);
    expect(ds[0]!.loc!.frames[0]).toMatchObject({ file: 'g.tgir', line: 2, col: 8 });
  });

  test('the pass consumes the annotations', () => {
    const { graph } = model('serialized_matmul(x, w, mode="output_channels", factor=3)');
    const m = buildTrainingModule(graph, DEFAULT_STEP, SGD).module;
    for (const g of m.graphs.values()) expect(g.ops.filter((o) => o.annotations.serialize !== undefined)).toEqual([]);
  });
});

describe('settings made in code', () => {
  function graph(serialize: SerializeSettings): Graph {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [4, 6]);
    const w = b.parameter('w', 'float32', [6, 2], Tensor.full('float32', [6, 2], 0.5));
    b.output('y', b.withAnnotations({ ipu: 1, stage: 1, serialize }, () => b.op('matmul', [x, w])));
    return b.graph;
  }

  test('the pieces keep the placement of the matmul', () => {
    const forward = buildInferenceModule(graph({ mode: 'reducing_dim', factor: 3, keepPrecision: false }), DEFAULT_STEP).graphs.get('forward')!;
    const made = forward.ops.filter((o) => !['input', 'parameter'].includes(o.kind));
    expect(made.map((o) => o.kind).sort()).toEqual(['add', 'add', 'matmul', 'matmul', 'matmul', 'slice', 'slice', 'slice', 'slice', 'slice', 'slice']);
    // the only stage is stage 0 of the pipeline (stages are numbered densely), still on IPU 1
    for (const op of made) expect(op.annotations).toEqual({ ipu: 1, stage: 0 });
  });

  test('a factor that is not a positive integer is an error', () => {
    expect(thrown(() => buildInferenceModule(graph({ mode: 'reducing_dim', factor: 0, keepPrecision: false }), DEFAULT_STEP)).diagnostics.map((d) => d.message)).toEqual([
      'serialized matmul: the factor must be a positive integer, got 0',
    ]);
    expect(thrown(() => buildInferenceModule(graph({ mode: 'reducing_dim', factor: 1.5, keepPrecision: false }), DEFAULT_STEP)).diagnostics.map((d) => d.message)).toEqual([
      'serialized matmul: the factor must be a positive integer, got 1.5',
    ]);
  });
});

describe('sessions report the warnings', () => {
  test('trainingModel and inferenceModel list each warning once', () => {
    const { graph } = model('serialized_matmul(x, w, mode="output_channels", factor=1)');
    const message = 'serialized matmul: factor 1 leaves the matmul whole';
    const t = trainingModel(graph, new Options(), SGD);
    t.compile();
    expect(t.warnings.filter((w) => w.message === message)).toHaveLength(1);
    const i = inferenceModel(graph, new Options());
    i.compile();
    expect(i.warnings.filter((w) => w.message === message)).toHaveLength(1);
  });
});

describe('serialized_matmul arguments in the model language', () => {
  test.each([
    ['serialized_matmul(x, w, mode="sideways", factor=2)', 'serialized_matmul: mode must be one of "input_channels", "reducing_dim", "output_channels", "none", got the string "sideways"'],
    ['serialized_matmul(x, w, mode="disabled", factor=2)', 'serialized_matmul: mode must be one of "input_channels", "reducing_dim", "output_channels", "none", got the string "disabled"'],
    ['serialized_matmul(x, w, mode="reducing_dim")', "missing argument 'factor' in the call of serialized_matmul"],
    ['serialized_matmul(x, w, factor=2)', "missing argument 'mode' in the call of serialized_matmul"],
    ['serialized_matmul(x, w, mode="reducing_dim", factor=0)', 'serialized_matmul: factor must be a positive integer, got the number 0'],
    ['serialized_matmul(x, w, mode="reducing_dim", factor=2, keep_precision=1)', 'serialized_matmul: keep_precision must be true or false, got the number 1'],
  ])('%s', (call, message) => {
    let got = '';
    try {
      model(call);
    } catch (e) {
      got = (e as DiagnosticError).diagnostics.map((d) => d.message).join('\n');
    }
    expect(got).toContain(message);
  });
});
