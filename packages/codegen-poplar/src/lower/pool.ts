import { Op, isFloat, numElements } from '@tilegraph/ir';
import { GraphEmitter } from '../context.js';
import { deviceType } from '../types.js';
import { outputVector, workerLoop } from './elementwise.js';
import type { Lowering } from './index.js';

/**
 * 2-D pooling and its gradients in generated vertices (PopLibs has no pooling gradient with
 * this op's exact tie and padding rules). The window geometry is compiled into the vertex; each
 * vertex computes a region of its result on the region's tile and reads the whole NCHW planes
 * the region touches. Gradients are gathered per input element (no scatter races), adding the
 * windows in the reference's order.
 */

interface Geometry {
  H: number;
  W: number;
  OH: number;
  OW: number;
  KH: number;
  KW: number;
  SH: number;
  SW: number;
  PT: number;
  PL: number;
  PB: number;
  PR: number;
  DH: number;
  DW: number;
}

function geometry(op: Op, inShape: readonly number[], outShape: readonly number[]): Geometry {
  const k = op.attrs['kernel'] as number[];
  const s = op.attrs['strides'] as number[];
  const p = op.attrs['pads'] as number[];
  const d = (op.attrs['dilations'] as number[] | undefined) ?? [1, 1];
  return {
    H: inShape[2]!,
    W: inShape[3]!,
    OH: outShape[2]!,
    OW: outShape[3]!,
    KH: k[0]!,
    KW: k[1]!,
    SH: s[0]!,
    SW: s[1]!,
    PT: p[0]!,
    PL: p[1]!,
    PB: p[2]!,
    PR: p[3]!,
    DH: d[0]!,
    DW: d[1]!,
  };
}

function geometryLines(g: Geometry): string[] {
  return [
    `    const int H = ${g.H}, W = ${g.W}, OH = ${g.OH}, OW = ${g.OW};`,
    `    const int KH = ${g.KH}, KW = ${g.KW}, SH = ${g.SH}, SW = ${g.SW}, DH = ${g.DH}, DW = ${g.DW};`,
    `    const int PT = ${g.PT}, PL = ${g.PL}, PB = ${g.PB}, PR = ${g.PR};`,
    '    (void)PB;',
    '    (void)PR;',
  ];
}

/** First and end tap of a window starting at `start` that land inside [0, size). */
const TAP_RANGE = [
  '  static void taps(int start, int k, int dil, int size, int &lo, int &hi) {',
  '    lo = start >= 0 ? 0 : (-start + dil - 1) / dil;',
  '    const int t = size - 1 - start;',
  '    const int last = t >= 0 ? t / dil : -((-t + dil - 1) / dil);',
  '    hi = last + 1 < k ? last + 1 : k;',
  '    if (hi < lo) hi = lo;',
  '  }',
];

function forwardBody(kind: 'max' | 'avg', g: Geometry, includePad: boolean): (name: string) => string {
  const reduce =
    kind === 'max'
      ? [
          '      float m = -INFINITY;',
          '      for (int i = ilo; i < ihi; ++i)',
          '        for (int j = jlo; j < jhi; ++j) {',
          '          const float v = float(in[base + (h0 + i * DH) * W + w0 + j * DW]);',
          '          if (v > m || v != v) m = v;',
          '        }',
          '      out[o] = T(m);',
        ]
      : [
          '      float s = 0;',
          '      for (int i = ilo; i < ihi; ++i)',
          '        for (int j = jlo; j < jhi; ++j) s += float(in[base + (h0 + i * DH) * W + w0 + j * DW]);',
          includePad
            ? '      const int hc = (h0 + (KH - 1) * DH + 1 < H + PB ? h0 + (KH - 1) * DH + 1 : H + PB) - h0, wc = (w0 + (KW - 1) * DW + 1 < W + PR ? w0 + (KW - 1) * DW + 1 : W + PR) - w0;'
            : '',
          includePad ? '      out[o] = T(s / float(hc * wc));' : '      out[o] = T(s / float((ihi - ilo) * (jhi - jlo)));',
        ].filter((l) => l !== '');
  return (name) =>
    [
      'template <typename T>',
      `class ${name} : public poplar::MultiVertex {`,
      'public:',
      '  poplar::Input<poplar::Vector<T>> in;',
      `  poplar::Output<${outputVector('T')}> out;`,
      '  unsigned begin;',
      '',
      ...TAP_RANGE,
      '',
      '  bool compute(unsigned workerId) {',
      ...geometryLines(g),
      ...workerLoop(
        ['T'],
        'out.size()',
        [
          'const unsigned q = begin + o;',
          'const int plane = int(q / unsigned(OH * OW));',
          'const int oh = int(q / unsigned(OW)) % OH, ow = int(q % unsigned(OW));',
          'const int h0 = oh * SH - PT, w0 = ow * SW - PL;',
          'const int base = plane * H * W;',
          'int ilo, ihi, jlo, jhi;',
          'taps(h0, KH, DH, H, ilo, ihi);',
          'taps(w0, KW, DW, W, jlo, jhi);',
          ...reduce.map((l) => l.slice(6)),
        ],
        'o',
      ).map((l) => `    ${l}`),
      '    return true;',
      '  }',
      '};',
    ].join('\n');
}

function gradBody(kind: 'max' | 'avg', g: Geometry, includePad: boolean): (name: string) => string {
  const fields =
    kind === 'max'
      ? ['  poplar::Input<poplar::Vector<T>> x;', '  poplar::Input<poplar::Vector<T>> y;', '  poplar::Input<poplar::Vector<T>> dy;']
      : ['  poplar::Input<poplar::Vector<T>> dy;'];
  const contribution =
    kind === 'max'
      ? [
          '          // does this window pick (h, w)? its first tap equal to the pooled value',
          '          const float yv = float(y[obase + oh * OW + ow]);',
          '          int ilo, ihi, jlo, jhi;',
          '          taps(oh * SH - PT, KH, DH, H, ilo, ihi);',
          '          taps(ow * SW - PL, KW, DW, W, jlo, jhi);',
          '          int wh = -1, ww = -1;',
          '          for (int a = ilo; a < ihi && wh < 0; ++a)',
          '            for (int c = jlo; c < jhi; ++c) {',
          '              const int th = oh * SH - PT + a * DH, tw = ow * SW - PL + c * DW;',
          '              const float v = float(x[base + th * W + tw]);',
          '              if (v == yv || (v != v && yv != yv)) {',
          '                wh = th;',
          '                ww = tw;',
          '                break;',
          '              }',
          '            }',
          '          if (wh == h && ww == w) acc += float(dy[obase + oh * OW + ow]);',
        ]
      : [
          '          const int h0 = oh * SH - PT, w0 = ow * SW - PL;',
          ...(includePad
            ? [
                '          const int hc = (h0 + (KH - 1) * DH + 1 < H + PB ? h0 + (KH - 1) * DH + 1 : H + PB) - h0;',
                '          const int wc = (w0 + (KW - 1) * DW + 1 < W + PR ? w0 + (KW - 1) * DW + 1 : W + PR) - w0;',
                '          acc += float(dy[obase + oh * OW + ow]) / float(hc * wc);',
              ]
            : [
                '          int ilo, ihi, jlo, jhi;',
                '          taps(h0, KH, DH, H, ilo, ihi);',
                '          taps(w0, KW, DW, W, jlo, jhi);',
                '          acc += float(dy[obase + oh * OW + ow]) / float((ihi - ilo) * (jhi - jlo));',
              ]),
        ];
  return (name) =>
    [
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
      ...workerLoop(
        ['T'],
        'out.size()',
        [
          'const unsigned q = begin + o;',
          'const int plane = int(q / unsigned(H * W));',
          'const int h = int(q / unsigned(W)) % H, w = int(q % unsigned(W));',
          'const int base = plane * H * W, obase = plane * OH * OW;',
          '(void)base;',
          'float acc = 0;',
          '// windows containing (h, w) in increasing (oh, ow): taps from the last to the first',
          'for (int i = KH - 1; i >= 0; --i) {',
          '  const int hh = h + PT - i * DH;',
          '  if (hh < 0 || hh % SH != 0 || hh / SH >= OH) continue;',
          '  const int oh = hh / SH;',
          '  for (int j = KW - 1; j >= 0; --j) {',
          '    const int wq = w + PL - j * DW;',
          '    if (wq < 0 || wq % SW != 0 || wq / SW >= OW) continue;',
          '    const int ow = wq / SW;',
          ...contribution.map((l) => l.slice(6)),
          '  }',
          '}',
          'out[o] = T(acc);',
        ],
        'o',
      ).map((l) => `    ${l}`),
      '    return true;',
      '  }',
      '};',
    ].join('\n');
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
    emitPlanes(op, e, cls, [{ field: 'in', operand: 0, plane: geo.H * geo.W }], geo.OH * geo.OW, planes);
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
      { field: 'x', operand: 0, plane: geo.H * geo.W },
      { field: 'y', operand: 1, plane: geo.OH * geo.OW },
      { field: 'dy', operand: 2, plane: geo.OH * geo.OW },
    ],
    geo.H * geo.W,
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
  emitPlanes(op, e, cls, [{ field: 'dy', operand: 0, plane: geo.OH * geo.OW }], geo.H * geo.W, planes);
}

export const POOL_LOWERINGS: Record<string, Lowering> = {
  maxpool2d: lowerPool('max'),
  avgpool2d: lowerPool('avg'),
  maxpool2d_grad: lowerMaxPoolGrad,
  avgpool2d_grad: lowerAvgPoolGrad,
};
