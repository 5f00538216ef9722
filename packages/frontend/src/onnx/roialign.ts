import { Tensor, Value, isFloat } from '@tilegraph/ir';
import { Emitter, NodeContext } from './context.js';

/**
 * RoiAlign: each region of interest is cut into output_height × output_width bins, each bin is
 * sampled on a grid of points, and each point is interpolated bilinearly from its four
 * neighbours (fetched by flat index from [N·H·W, C]); a bin is the average of its points, or in
 * max mode the largest weighted neighbour, as onnxruntime and the specification's reference do.
 * With sampling_ratio = 0 the grid size depends on each region's size, so the regions must be
 * known at import.
 */

/** Per-axis sample data, shaped [R, out, samples]. */
interface AxisSamples {
  readonly low: Value;
  readonly high: Value;
  /** Weight of `low` and of `high`. */
  readonly wLow: Value;
  readonly wHigh: Value;
  /** The point lies within [-1, len] (else it contributes 0). */
  readonly inside: Value;
}

/**
 * Sample coordinates along one axis: start + o·bin + (i + 0.5)·bin/grid for bins o and grid
 * points i, with the reference's clamping to [0, len - 1].
 */
function axisSamples(e: Emitter, start: Value, bin: Value, grid: Value, out: number, points: number, len: number): AxisSamples {
  const o = e.constant(Tensor.from('float32', [1, out, 1], [...Array(out).keys()]));
  const i = e.constant(Tensor.from('float32', [1, 1, points], [...Array(points).keys()].map((k) => k + 0.5)));
  const pos = e.add(e.add(start, e.mul(o, bin)), e.div(e.mul(i, bin), grid)); // [R, out, points]
  const inside = e.op('not', [e.op('or', [e.op('less', [pos, e.scalar('float32', -1)]), e.op('greater', [pos, e.scalar('float32', len)])])]);
  const p = e.op('max', [pos, e.scalar('float32', 0)]);
  const floor = e.unary('floor', p);
  const atEnd = e.op('not', [e.op('less', [floor, e.scalar('float32', len - 1)])]);
  const last = e.scalar('float32', len - 1);
  const low = e.op('where', [atEnd, last, floor]);
  const high = e.op('where', [atEnd, last, e.add(floor, e.scalar('float32', 1))]);
  const frac = e.op('where', [atEnd, e.scalar('float32', 0), e.sub(p, floor)]);
  return { low: e.cast(low, 'int32'), high: e.cast(high, 'int32'), wLow: e.sub(e.scalar('float32', 1), frac), wHigh: frac, inside };
}

export function roiAlign(c: NodeContext): Value {
  const e = c.e;
  const x = c.input(0);
  const rois = c.input(1);
  const batch = c.input(2);
  if (x.type.shape.length !== 4 || !isFloat(x.type.dtype)) c.fail(`X must be a float [N, C, H, W] tensor`);
  const [n, ch, h, w] = x.type.shape as [number, number, number, number];
  if (rois.type.shape.length !== 2 || rois.type.shape[1] !== 4) c.fail(`rois must be [num_rois, 4], got [${rois.type.shape.join(',')}]`);
  const r = rois.type.shape[0]!;
  if (batch.type.shape.length !== 1 || batch.type.shape[0] !== r) c.fail(`batch_indices must be [${r}], got [${batch.type.shape.join(',')}]`);
  const oh = c.int('output_height', 1);
  const ow = c.int('output_width', 1);
  const ratio = c.int('sampling_ratio', 0);
  const scale = c.float('spatial_scale', 1);
  const mode = c.string('mode', 'avg');
  if (mode !== 'avg' && mode !== 'max') c.fail(`mode must be 'avg' or 'max', got '${mode}'`);
  const ctm = c.opset >= 16 ? c.string('coordinate_transformation_mode', 'half_pixel') : 'output_half_pixel';
  if (ctm !== 'half_pixel' && ctm !== 'output_half_pixel') c.fail(`unknown coordinate_transformation_mode '${ctm}'`);
  if (oh < 1 || ow < 1 || ratio < 0) c.fail(`output_height and output_width must be positive and sampling_ratio not negative`);
  const halfPixel = ctm === 'half_pixel';
  const offset = halfPixel ? 0.5 : 0;
  const f = e.cast(rois, 'float32');
  const col = (k: number) => e.op('reshape', [e.op('slice', [f], { starts: [k], ends: [k + 1], axes: [1] })], { shape: [r, 1, 1] });
  const edge = (k: number) => e.sub(e.mul(col(k), e.scalar('float32', scale)), e.scalar('float32', offset));
  const [x0, y0, x1, y1] = [edge(0), edge(1), edge(2), edge(3)];
  const extent = (a: Value, b: Value) => (halfPixel ? e.sub(b, a) : e.op('max', [e.sub(b, a), e.scalar('float32', 1)]));
  const [rh, rw] = [extent(y0, y1), extent(x0, x1)];
  // grid points per bin: fixed, or ceil(extent / bins) per region (regions known at import)
  let gh: Value;
  let gw: Value;
  let [ph, pw] = [ratio, ratio];
  if (ratio > 0) {
    gh = gw = e.scalar('float32', ratio);
  } else {
    const known = c.constFloats(1, 'rois (sampling_ratio = 0 sizes the sampling grid from them)');
    const sizes = (lo: number, hi: number, bins: number) =>
      [...Array(r).keys()].map((k) => {
        const ext = (known[k * 4 + hi]! - known[k * 4 + lo]!) * scale;
        return Math.max(1, Math.ceil((halfPixel ? ext : Math.max(ext, 1)) / bins));
      });
    const [hs, ws] = [sizes(1, 3, oh), sizes(0, 2, ow)];
    [ph, pw] = [Math.max(...hs), Math.max(...ws)];
    gh = e.constant(Tensor.from('float32', [r, 1, 1], hs));
    gw = e.constant(Tensor.from('float32', [r, 1, 1], ws));
  }
  const ys = axisSamples(e, y0, e.div(rh, e.scalar('float32', oh)), gh, oh, ph, h);
  const xs = axisSamples(e, x0, e.div(rw, e.scalar('float32', ow)), gw, ow, pw, w);
  // [R, oh, ph, 1, 1] against [R, 1, 1, ow, pw]
  const yv = (v: Value) => e.op('reshape', [v], { shape: [r, oh, ph, 1, 1] });
  const xv = (v: Value) => e.op('reshape', [v], { shape: [r, 1, 1, ow, pw] });
  const inside = e.op('and', [yv(ys.inside), xv(xs.inside)]);
  // with sampling_ratio = 0: the points within each region's own grid size
  let onGrid: Value | undefined;
  if (ratio === 0) {
    const pt = (shape: number[], count: number) => e.constant(Tensor.from('float32', shape, [...Array(count).keys()]));
    const within = (p: Value, g: Value) => e.op('less', [p, e.op('reshape', [g], { shape: [r, 1, 1, 1, 1] })]);
    onGrid = e.op('and', [within(pt([1, 1, ph, 1, 1], ph), gh), within(pt([1, 1, 1, 1, pw], pw), gw)]);
  }
  const table = e.op('reshape', [e.op('transpose', [x], { perm: [0, 2, 3, 1] })], { shape: [n * h * w, ch] });
  const base = e.mul(e.op('reshape', [e.cast(batch, 'int32')], { shape: [r, 1, 1, 1, 1] }), e.scalar('int32', h * w));
  const corners: Value[] = [];
  for (const [yi, wy] of [[ys.low, ys.wLow], [ys.high, ys.wHigh]] as const) {
    for (const [xi, wx] of [[xs.low, xs.wLow], [xs.high, xs.wHigh]] as const) {
      const idx = e.add(e.add(base, e.mul(yv(yi), e.scalar('int32', w))), xv(xi));
      // a point outside [-1, len] contributes 0 (to the sum, and as a candidate of the max)
      let weight = e.op('where', [inside, e.mul(yv(wy), xv(wx)), e.scalar('float32', 0)]);
      if (onGrid && mode === 'avg') weight = e.op('where', [onGrid, weight, e.scalar('float32', 0)]);
      const v = e.cast(e.op('gather', [table, idx], { axis: 0 }), 'float32'); // [R, oh, ph, ow, pw, C]
      corners.push(e.mul(v, e.op('unsqueeze', [weight], { axes: [5] })));
    }
  }
  let y: Value;
  if (mode === 'avg') {
    const sum = e.op('reduce_sum', [corners.reduce((a, b) => e.add(a, b))], { axes: [2, 4], keepdims: false });
    const count = e.op('max', [e.mul(gh, gw), e.scalar('float32', 1)]);
    y = e.div(sum, count.type.shape.length === 0 ? count : e.op('reshape', [count], { shape: [r, 1, 1, 1] }));
  } else {
    const best = corners.reduce((a, b) => e.op('max', [a, b]));
    const candidates = onGrid ? e.op('where', [e.op('unsqueeze', [onGrid], { axes: [5] }), best, e.scalar('float32', -Infinity)]) : best;
    y = e.op('reduce_max', [candidates], { axes: [2, 4], keepdims: false });
  }
  return e.cast(e.op('transpose', [y], { perm: [0, 3, 1, 2] }), x.type.dtype);
}
