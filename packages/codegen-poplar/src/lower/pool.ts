import { Op, isFloat, kernels, numElements } from '@tilegraph/ir';
import { GraphEmitter } from '../context.js';
import { deviceType } from '../types.js';
import { outputVector, workerLoop } from './elementwise.js';
import type { Lowering } from './index.js';

/**
 * Pooling over any number of spatial dimensions and its gradients in generated vertices (PopLibs
 * has no pooling gradient with this op's exact tie and padding rules). The window geometry is
 * compiled into the vertex; each vertex computes a region of its result on the region's tile and
 * reads the whole N·C planes the region touches. Gradients are gathered per input element (no
 * scatter races), adding the windows in the reference's order.
 */

interface Geometry {
  /** Spatial sizes of the input and the output. */
  readonly input: readonly number[];
  readonly output: readonly number[];
  readonly kernel: readonly number[];
  readonly strides: readonly number[];
  /** all begins, then all ends */
  readonly pads: readonly number[];
  readonly dilations: readonly number[];
}

function geometry(op: Op, inShape: readonly number[], outShape: readonly number[]): Geometry {
  const input = inShape.slice(2);
  const rank = input.length;
  return {
    input,
    output: outShape.slice(2),
    kernel: op.attrs['kernel'] as number[],
    strides: kernels.spatialAttr('strides', op.attrs['strides'] as number[], rank, 1),
    pads: kernels.spatialPads(op.attrs['pads'] as number[], rank),
    dilations: kernels.spatialAttr('dilations', op.attrs['dilations'] as number[], rank, 1),
  };
}

const cArray = (xs: readonly number[]) => `{${xs.join(', ')}}`;

function geometryLines(g: Geometry): string[] {
  const rank = g.input.length;
  return [
    `    constexpr int R = ${rank};`,
    `    const int IN[R] = ${cArray(g.input)}, OUT[R] = ${cArray(g.output)};`,
    `    const int KER[R] = ${cArray(g.kernel)}, S[R] = ${cArray(g.strides)}, D[R] = ${cArray(g.dilations)};`,
    `    const int PB[R] = ${cArray(g.pads.slice(0, rank))}, PE[R] = ${cArray(g.pads.slice(rank))};`,
    `    const int IN_N = ${numElements(g.input)}, OUT_N = ${numElements(g.output)};`,
    '    // not every vertex reads every size',
    '    (void)IN, (void)OUT, (void)KER, (void)S, (void)D, (void)PB, (void)PE, (void)IN_N, (void)OUT_N;',
  ];
}

/** First and end tap of a window starting at `start` that land inside [0, size). */
const TAP_RANGE = [
  '  static inline void taps(int start, int k, int dil, int size, int &lo, int &hi) {',
  '    lo = start >= 0 ? 0 : (-start + dil - 1) / dil;',
  '    const int t = size - 1 - start;',
  '    const int last = t >= 0 ? t / dil : -((-t + dil - 1) / dil);',
  '    hi = last + 1 < k ? last + 1 : k;',
  '    if (hi < lo) hi = lo;',
  '  }',
];

/**
 * Lines of the window of output position `o` (a flat position within a plane): per dimension its
 * start st[], the tap range lo[]/hi[] inside the input and, with `clipped`, the divisor `clip` of
 * count_include_pad (taps within the padded input). Written out dimension by dimension with the
 * sizes as literals, so every division is by a constant (a tile has no integer divide).
 */
function windowLines(g: Geometry, o: string, clipped: boolean): string[] {
  const rank = g.input.length;
  const lines = ['int st[R], lo[R], hi[R];', ...(clipped ? ['int clip = 1;'] : []), '{', `  int r = ${o};`];
  for (let d = rank - 1; d >= 0; d--) {
    const [size, out, k, s, dil, pb, pe] = [g.input[d]!, g.output[d]!, g.kernel[d]!, g.strides[d]!, g.dilations[d]!, g.pads[d]!, g.pads[rank + d]!];
    lines.push(`  st[${d}] = (r % ${out}) * ${s} - ${pb};`);
    if (d > 0) lines.push(`  r /= ${out};`);
    lines.push(`  taps(st[${d}], ${k}, ${dil}, ${size}, lo[${d}], hi[${d}]);`);
    if (clipped) lines.push(`  { const int c = (${size + pe - 1} - st[${d}]) / ${dil} + 1; clip *= c < ${k} ? c : ${k}; }`);
  }
  lines.push('}');
  return lines;
}

/**
 * Nested loops over the taps of the window in windowLines (row-major), with `at` the flat input
 * offset within a plane; `body` runs per tap, `stop` (if any) ends all loops when true.
 */
function tapLoops(rank: number, body: readonly string[], stop?: string): string[] {
  const lines: string[] = [];
  for (let d = 0; d < rank; d++) {
    const cond = stop ? ` && !(${stop})` : '';
    lines.push(`${'  '.repeat(d)}for (int t${d} = lo[${d}]; t${d} < hi[${d}]${cond}; ++t${d}) {`);
  }
  const at = Array.from({ length: rank }, (_, d) => d).reduce((acc, d) => {
    const pos = `(st[${d}] + t${d} * D[${d}])`;
    return d === 0 ? pos : `${d === 1 ? acc : `(${acc})`} * IN[${d}] + ${pos}`;
  }, '');
  lines.push(`${'  '.repeat(rank)}const int at = ${at};`);
  for (const l of body) lines.push(`${'  '.repeat(rank)}${l}`);
  for (let d = rank - 1; d >= 0; d--) lines.push(`${'  '.repeat(d)}}`);
  return lines;
}

function vertexClass(name: string, fields: readonly string[], g: Geometry, loop: readonly string[]): string {
  return [
    'template <typename T>',
    `class ${name} : public poplar::MultiVertex {`,
    'public:',
    ...fields,
    `  poplar::Output<${outputVector('T')}> out;`,
    '  unsigned begin;',
    '',
    ...TAP_RANGE,
    '',
    '  bool compute(unsigned workerId) {',
    ...geometryLines(g),
    ...workerLoop(['T'], 'out.size()', loop, 'o').map((l) => `    ${l}`),
    '    return true;',
    '  }',
    '};',
  ].join('\n');
}

function forwardBody(kind: 'max' | 'avg', g: Geometry, includePad: boolean): (name: string) => string {
  const rank = g.input.length;
  const reduce =
    kind === 'max'
      ? ['float m = -INFINITY;', ...tapLoops(rank, ['const float v = float(in[base + at]);', '// two selects (a maximum, then NaN wins): no branch on the data', 'm = v > m ? v : m;', 'm = v != v ? v : m;']), 'out[o] = T(m);']
      : [
          'float s = 0;',
          ...(includePad ? [] : ['int count = 0;']),
          ...tapLoops(rank, ['s += float(in[base + at]);', ...(includePad ? [] : ['++count;'])]),
          includePad ? 'out[o] = T(s / float(clip));' : 'out[o] = T(s / float(count));',
        ];
  return (name) =>
    vertexClass(name, ['  poplar::Input<poplar::Vector<T>> in;'], g, [
      'const unsigned q = begin + o;',
      'const int plane = int(q / unsigned(OUT_N));',
      ...windowLines(g, 'int(q % unsigned(OUT_N))', includePad),
      'const int base = plane * IN_N;',
      ...reduce,
    ]);
}

function gradBody(kind: 'max' | 'avg', g: Geometry, includePad: boolean): (name: string) => string {
  const rank = g.input.length;
  const fields =
    kind === 'max'
      ? ['  poplar::Input<poplar::Vector<T>> x;', '  poplar::Input<poplar::Vector<T>> y;', '  poplar::Input<poplar::Vector<T>> dy;']
      : ['  poplar::Input<poplar::Vector<T>> dy;'];
  const contribution =
    kind === 'max'
      ? [
          '// does this window pick the element? its first tap equal to the pooled value',
          'const float yv = float(y[obase + w]);',
          'int winner = -1;',
          ...tapLoops(rank, ['const float v = float(x[base + at]);', 'if (v == yv || (v != v && yv != yv)) winner = at;'], 'winner >= 0'),
          'if (winner == e) acc += float(dy[obase + w]);',
        ]
      : [
          ...(includePad ? [] : ['int count = 1;', 'for (int d = 0; d < R; ++d) count *= hi[d] - lo[d];']),
          `acc += float(dy[obase + w]) / float(${includePad ? 'clip' : 'count'});`,
        ];
  // the windows containing the element, in increasing output order: taps from the last to the first
  const loops: string[] = [];
  for (let d = 0; d < rank; d++) {
    const pad = '  '.repeat(d);
    loops.push(
      `${pad}for (int i${d} = KER[${d}] - 1; i${d} >= 0; --i${d}) {`,
      `${pad}  const int q${d} = idx[${d}] + PB[${d}] - i${d} * D[${d}];`,
      `${pad}  if (q${d} < 0 || q${d} % S[${d}] != 0 || q${d} / S[${d}] >= OUT[${d}]) continue;`,
    );
  }
  const inner = '  '.repeat(rank);
  const w = Array.from({ length: rank }, (_, d) => d).reduce((acc, d) => (d === 0 ? `q0 / S[0]` : `(${acc}) * OUT[${d}] + q${d} / S[${d}]`), '');
  loops.push(`${inner}const int w = ${w};`);
  loops.push(...windowLines(g, 'w', includePad).map((l) => inner + l));
  loops.push(...contribution.map((l) => inner + l));
  for (let d = rank - 1; d >= 0; d--) loops.push(`${'  '.repeat(d)}}`);
  return (name) =>
    vertexClass(name, fields, g, [
      'const unsigned q = begin + o;',
      'const int plane = int(q / unsigned(IN_N)), e = int(q % unsigned(IN_N));',
      'int idx[R];',
      '{',
      '  int r = e;',
      ...g.input.map((_, i) => g.input.length - 1 - i).flatMap((d) => [`  idx[${d}] = r % ${g.input[d]};`, ...(d > 0 ? [`  r /= ${g.input[d]};`] : [])]),
      '}',
      'const int base = plane * IN_N, obase = plane * OUT_N;',
      '(void)base;',
      'float acc = 0;',
      ...loops,
      'out[o] = T(acc);',
    ]);
}

/**
 * Emits a vertex per region of the result; `planeIn` / `planeOut` are the element counts of one
 * plane of the inputs (listed with their fields) and of the result.
 */
function emitPlanes(
  op: Op,
  e: GraphEmitter,
  cls: string,
  inputs: { field: string; operand: number; plane: number }[],
  planeOut: number,
  planes: number,
): void {
  const ipu = e.ipuOf(op);
  const g = e.g(ipu);
  const dtype = op.result.type.dtype;
  const vertex = e.mc.codelets.vertexName(cls, deviceType(dtype).device);
  const t = e.newResult(op.result, ipu);
  if (numElements(op.result.type.shape) === 0) return;
  const views = inputs.map((i) => {
    const local = e.local('f');
    e.emit(`poplar::Tensor ${local} = ${e.operand(op, i.operand)}.reshape({${planes}, ${i.plane}});`);
    return local;
  });
  const fo = e.local('f');
  e.emit(`poplar::Tensor ${fo} = ${t}.flatten();`);
  const cs = e.computeSet(op.kind, [e.bufferNamed(t)]);
  e.emit(`forEachRegion(${g}, ${fo}, [&](unsigned tile, std::size_t b, std::size_t e) {`);
  e.emit(`  const std::size_t p0 = b / ${planeOut}, p1 = (e - 1) / ${planeOut} + 1;`);
  const conn = inputs.map((i, k) => `{"${i.field}", ${views[k]!}.slice(p0, p1).flatten()}`);
  e.emit(`  poplar::VertexRef v = ${g}.addVertex(${cs}, "${vertex}", {${[...conn, `{"out", ${fo}.slice(b, e)}`].join(', ')}});`);
  e.emit(`  ${g}.setInitialValue(v["begin"], unsigned(b - p0 * ${planeOut}));`);
  e.emit(`  ${g}.setTileMapping(v, tile);`);
  e.emit(`  setCycles(${g}, v, e - b, 16);`);
  e.emit('});');
  e.execute(cs);
}

function checkFloat(op: Op): void {
  if (!isFloat(op.result.type.dtype)) throw new Error(`internal: ${op.kind} on ${op.result.type.dtype}`);
}

function lowerPool(kind: 'max' | 'avg'): Lowering {
  return (op, e) => {
    checkFloat(op);
    const x = op.operands[0]!;
    const geo = geometry(op, x.type.shape, op.result.type.shape);
    const includePad = kind === 'avg' && (op.attrs['count_include_pad'] as boolean);
    const cls = e.mc.codelets.add(kind === 'max' ? 'MaxPool' : 'AvgPool', JSON.stringify([geo, includePad]), forwardBody(kind, geo, includePad), ['float', 'half']);
    const planes = x.type.shape[0]! * x.type.shape[1]!;
    emitPlanes(op, e, cls, [{ field: 'in', operand: 0, plane: numElements(geo.input) }], numElements(geo.output), planes);
  };
}

function lowerMaxPoolGrad(op: Op, e: GraphEmitter): void {
  checkFloat(op);
  const x = op.operands[0]!;
  const y = op.operands[1]!;
  const geo = geometry(op, x.type.shape, y.type.shape);
  const cls = e.mc.codelets.add('MaxPoolGrad', JSON.stringify(geo), gradBody('max', geo, false), ['float', 'half']);
  const planes = x.type.shape[0]! * x.type.shape[1]!;
  emitPlanes(
    op,
    e,
    cls,
    [
      { field: 'x', operand: 0, plane: numElements(geo.input) },
      { field: 'y', operand: 1, plane: numElements(geo.output) },
      { field: 'dy', operand: 2, plane: numElements(geo.output) },
    ],
    numElements(geo.input),
    planes,
  );
}

function lowerAvgPoolGrad(op: Op, e: GraphEmitter): void {
  checkFloat(op);
  const dy = op.operands[0]!;
  const inShape = op.attrs['input_shape'] as number[];
  const geo = geometry(op, inShape, dy.type.shape);
  const includePad = op.attrs['count_include_pad'] as boolean;
  const cls = e.mc.codelets.add('AvgPoolGrad', JSON.stringify([geo, includePad]), gradBody('avg', geo, includePad), ['float', 'half']);
  const planes = inShape[0]! * inShape[1]!;
  emitPlanes(op, e, cls, [{ field: 'dy', operand: 0, plane: numElements(geo.output) }], numElements(geo.input), planes);
}

export const POOL_LOWERINGS: Record<string, Lowering> = {
  max_pool: lowerPool('max'),
  avg_pool: lowerPool('avg'),
  max_pool_grad: lowerMaxPoolGrad,
  avg_pool_grad: lowerAvgPoolGrad,
};
