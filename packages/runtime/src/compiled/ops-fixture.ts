import { Graph, GraphBuilder, Module, Tensor, Value, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { moduleInputs, randomTensor } from './testing.js';

/** A module with one graph per op family (for the compiled-vs-reference tests). */

type Family = (b: GraphBuilder) => void;

const f32 = (b: GraphBuilder, name: string, shape: number[]) => b.input(name, 'float32', shape);

const FAMILIES: Record<string, Family> = {
  elementwise_f32: (b) => {
    const a = f32(b, 'ew_a', [3, 4]);
    const c = f32(b, 'ew_b', [4]);
    const col = f32(b, 'ew_col', [3, 1]);
    const pos = b.op('add', [b.op('abs', [a]), b.scalar('float32', 0.5)]);
    const out = (n: string, v: Value) => b.output(`ew.${n}`, v);
    out('add', b.op('add', [a, c]));
    out('sub', b.op('sub', [col, a]));
    out('mul', b.op('mul', [a, c]));
    out('div', b.op('div', [a, col]));
    out('pow', b.op('pow', [pos, c]));
    out('max', b.op('max', [a, col]));
    out('min', b.op('min', [a, c]));
    for (const u of ['neg', 'abs', 'exp', 'tanh', 'sigmoid', 'relu', 'erf', 'sin', 'cos', 'floor', 'ceil', 'round', 'sign']) out(u, b.op(u, [a]));
    for (const u of ['log', 'sqrt', 'reciprocal']) out(u, b.op(u, [pos]));
    out('gelu', b.op('gelu', [a]));
    out('gelu_tanh', b.op('gelu', [a], { approximate: 'tanh' }));
    out('clip', b.op('clip', [a], { min: -0.5, max: 0.7 }));
    out('clip_lo', b.op('clip', [a], { min: 0.1 }));
    const gt = b.op('greater', [a, c]);
    out('where', b.op('where', [gt, a, col]));
    out('equal', b.op('equal', [b.op('round', [a]), b.op('round', [col])]));
    out('less', b.op('less', [a, c]));
    out('and', b.op('and', [gt, b.op('less', [a, col])]));
    out('or', b.op('or', [gt, b.op('less', [a, col])]));
    out('not', b.op('not', [gt]));
    const scaled = b.op('mul', [a, b.scalar('float32', 1000)]);
    out('to_i32', b.op('cast', [scaled], { to: 'int32' }));
    out('to_u32', b.op('cast', [scaled], { to: 'uint32' }));
    out('to_bool', b.op('cast', [b.op('round', [a])], { to: 'bool' }));
    out('to_f16', b.op('cast', [a], { to: 'float16' }));
    // a longer chain in one vertex
    out('chain', b.op('tanh', [b.op('mul', [b.op('add', [b.op('exp', [a]), c]), b.scalar('float32', 0.25)])]));
  },
  elementwise_f16: (b) => {
    const a = b.input('h_a', 'float16', [2, 5]);
    const c = b.input('h_b', 'float16', [5]);
    b.output('h.add', b.op('add', [a, c]));
    b.output('h.mul', b.op('mul', [a, b.scalar('float16', 0.1)]));
    b.output('h.chain', b.op('sigmoid', [b.op('sub', [b.op('exp', [a]), c])]));
    b.output('h.to_f32', b.op('cast', [b.op('div', [a, c])], { to: 'float32' }));
    b.output('h.where', b.op('where', [b.op('greater', [a, c]), a, c]));
  },
  // inputs broadcast along the output (per channel, per row, a bias), over several tiles so that
  // vertices start at different elements; compared bit for bit
  elementwise_broadcast: (b) => {
    const x = f32(b, 'bc_x', [2, 3, 8, 10]);
    const scale = f32(b, 'bc_scale', [3, 1, 1]);
    const shift = f32(b, 'bc_shift', [3, 1, 1]);
    const bias = f32(b, 'bc_bias', [10]);
    const rows = f32(b, 'bc_rows', [3, 8, 1]);
    b.output('bc.channel', b.op('relu', [b.op('add', [b.op('mul', [x, scale]), shift])]));
    b.output('bc.bias', b.op('add', [x, bias]));
    b.output('bc.rows', b.op('div', [x, rows]));
    b.output('bc.mixed', b.op('sub', [b.op('mul', [x, scale]), bias]));
    const h = b.input('bc_h', 'float16', [2, 3, 8, 10]);
    b.output('bc.half', b.op('mul', [h, b.input('bc_hscale', 'float16', [3, 1, 1])]));
  },
  elementwise_int: (b) => {
    const i = b.input('i_a', 'int32', [2, 6]);
    const j = b.input('i_b', 'int32', [6]);
    const u = b.op('cast', [i], { to: 'uint32' });
    const out = (n: string, v: Value) => b.output(`int.${n}`, v);
    for (const op of ['add', 'sub', 'mul', 'div', 'max', 'min']) out(op, b.op(op, [i, j]));
    out('pow', b.op('pow', [i, b.op('abs', [j])]));
    for (const op of ['neg', 'abs', 'relu', 'sign']) out(op, b.op(op, [i]));
    out('clip', b.op('clip', [i], { min: -1, max: 1.5 }));
    out('to_f32', b.op('cast', [i], { to: 'float32' }));
    out('u_add', b.op('add', [u, b.scalar('uint32', 4000000000)]));
    out('u_div', b.op('div', [u, b.op('cast', [j], { to: 'uint32' })]));
    out('u_neg', b.op('neg', [u]));
    out('eq', b.op('equal', [i, j]));
    for (const op of ['bitwise_and', 'bitwise_or', 'bitwise_xor']) out(op, b.op(op, [i, j]));
    out('bitwise_not', b.op('bitwise_not', [i]));
    out('u_bitwise_xor', b.op('bitwise_xor', [u, b.scalar('uint32', 0xf0f0f0f0)]));
    out('u_bitwise_not', b.op('bitwise_not', [u]));
    // float bits of whole numbers, and back (arbitrary int bits could be NaN patterns)
    const bits = b.op('bitcast', [b.op('cast', [i], { to: 'float32' })], { to: 'int32' });
    out('bitcast_i32', bits);
    out('bitcast_f32', b.op('bitcast', [bits], { to: 'float32' }));
    out('bitcast_u32', b.op('bitcast', [i], { to: 'uint32' }));
  },
  matmul: (b) => {
    const a = f32(b, 'mm_a', [3, 4]);
    const w = b.parameter('mm.w', 'float32', [4, 5], { kind: 'init', fn: 'normal', args: { seed: 11 } });
    b.output('mm.2d', b.op('matmul', [a, w]));
    const ba = f32(b, 'mm_ba', [2, 1, 3, 4]);
    const bb = f32(b, 'mm_bb', [3, 4, 2]);
    b.output('mm.batched', b.op('matmul', [ba, bb]));
    const v = f32(b, 'mm_v', [4]);
    b.output('mm.vec_mat', b.op('matmul', [v, w]));
    b.output('mm.mat_vec', b.op('matmul', [a, v]));
    b.output('mm.dot', b.op('matmul', [v, v]));
    const ia = b.input('mm_ia', 'int32', [2, 3]);
    const ib = b.input('mm_ib', 'int32', [3, 2]);
    b.output('mm.int', b.op('matmul', [ia, ib]));
  },
  conv: (b) => {
    const x = f32(b, 'cv_x', [2, 4, 7, 7]);
    const w = b.parameter('cv.w', 'float32', [6, 2, 3, 3], { kind: 'init', fn: 'normal', args: { seed: 12, std: 0.3 } });
    const bias = b.parameter('cv.b', 'float32', [6], { kind: 'init', fn: 'normal', args: { seed: 13 } });
    b.output('cv.grouped', b.op('convolution', [x, w, bias], { groups: 2, strides: [2, 1], pads: [1, 0, 2, 1], dilations: [1, 2] }));
    const w1 = b.parameter('cv.w1', 'float32', [3, 4, 1, 1], { kind: 'init', fn: 'normal', args: { seed: 14 } });
    b.output('cv.pointwise', b.op('convolution', [x, w1]));
    // weight gradients (calculateWeightDeltas): groups, strides, dilations, asymmetric pads; and pads past the kernel
    const dy = f32(b, 'cv_dy', [2, 6, 4, 4]);
    b.output('cv.weights_grad', b.op('convolution_weights_grad', [dy, x], { groups: 2, strides: [2, 1], pads: [1, 0, 2, 1], dilations: [1, 2], weight_shape: [6, 2, 3, 3] }));
    const dyPad = f32(b, 'cv_dy_pad', [2, 3, 4, 5]);
    b.output('cv.weights_grad_pad', b.op('convolution_weights_grad', [dyPad, x], { strides: [3, 3], pads: [4, 3, 2, 4], weight_shape: [3, 4, 2, 2] }));
  },
  pool: (b) => {
    const x = f32(b, 'pl_x', [2, 3, 7, 6]);
    const mp = b.op('max_pool', [x], { kernel: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], ceil_mode: true });
    b.output('pl.max', mp);
    b.output('pl.max_dilated', b.op('max_pool', [x], { kernel: [2, 2], dilations: [2, 1], strides: [1, 2] }));
    const ap = b.op('avg_pool', [x], { kernel: [3, 2], strides: [2, 2], pads: [1, 1, 1, 0] });
    b.output('pl.avg', ap);
    b.output('pl.avg_pad', b.op('avg_pool', [x], { kernel: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], count_include_pad: true }));
    const dy = b.op('mul', [mp, b.scalar('float32', 3)]);
    b.output('pl.max_grad', b.op('max_pool_grad', [x, mp, dy], { kernel: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], ceil_mode: true }));
    b.output('pl.avg_grad', b.op('avg_pool_grad', [ap], { kernel: [3, 2], strides: [2, 2], pads: [1, 1, 1, 0], input_shape: [2, 3, 7, 6] }));
    b.output(
      'pl.avg_grad_pad',
      b.op('avg_pool_grad', [b.op('avg_pool', [x], { kernel: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], count_include_pad: true })], {
        kernel: [3, 3],
        strides: [2, 2],
        pads: [1, 1, 1, 1],
        count_include_pad: true,
        input_shape: [2, 3, 7, 6],
      }),
    );
  },
  reduce: (b) => {
    const x = f32(b, 'rd_x', [3, 4, 5]);
    b.output('rd.sum', b.op('reduce_sum', [x], { axes: [1] }));
    b.output('rd.mean', b.op('reduce_mean', [x], { axes: [0, 2], keepdims: true }));
    b.output('rd.max', b.op('reduce_max', [x]));
    b.output('rd.min', b.op('reduce_min', [x], { axes: [-1] }));
    b.output('rd.prod', b.op('reduce_prod', [b.op('mul', [x, b.scalar('float32', 0.5)])], { axes: [2] }));
    const m = b.op('greater', [x, b.scalar('float32', 0)]);
    b.output('rd.any', b.op('reduce_max', [m], { axes: [2] }));
    b.output('rd.all', b.op('reduce_min', [m], { axes: [2] }));
    b.output('rd.isum', b.op('reduce_sum', [b.op('cast', [b.op('mul', [x, b.scalar('float32', 10)])], { to: 'int32' })], { axes: [0] }));
    b.output('rd.argmax', b.op('argmax', [x], { axis: 1 }));
    b.output('rd.argmax_last', b.op('argmax', [b.op('round', [x])], { axis: -1, keepdims: true, select_last_index: true }));
    b.output('rd.h_mean', b.op('reduce_mean', [b.op('cast', [x], { to: 'float16' })], { axes: [1] }));
  },
  movement: (b) => {
    const x = f32(b, 'mv_x', [2, 3, 4]);
    const out = (n: string, v: Value) => b.output(`mv.${n}`, v);
    out('reshape', b.op('reshape', [x], { shape: [6, -1] }));
    out('transpose', b.op('transpose', [x], { perm: [2, 0, 1] }));
    out('slice', b.op('slice', [x], { starts: [1, -1], ends: [3, -100], axes: [1, 2], steps: [1, -2] }));
    out('slice_step', b.op('slice', [x], { starts: [0], ends: [4], axes: [2], steps: [3] }));
    out('concat', b.op('concat', [x, b.op('mul', [x, b.scalar('float32', 2)])], { axis: 1 }));
    const parts = b.ops('split', [x], { axis: 2, sizes: [1, 3] });
    out('split0', parts[0]!);
    out('split1', parts[1]!);
    const idx = b.input('mv_idx', 'int32', [2, 2]);
    out('gather', b.op('gather', [x, idx], { axis: 1 }));
    const upd = f32(b, 'mv_upd', [2, 2, 2, 4]);
    out('scatter_add', b.op('scatter_add', [x, idx, upd], { axis: 1 }));
    out('squeeze', b.op('squeeze', [b.op('reshape', [x], { shape: [2, 1, 3, 4] })], { axes: [1] }));
    out('unsqueeze', b.op('unsqueeze', [x], { axes: [0, 3] }));
    out('expand', b.op('expand', [b.op('reshape', [x], { shape: [2, 1, 3, 4] })], { shape: [2, 2, 3, 4] }));
    out('flatten', b.op('flatten', [x], { axis: 2 }));
    out('pad_constant', b.op('pad', [x], { pads: [0, 1, -1, 1, 0, 2], value: 1.5 }));
    out('pad_reflect', b.op('pad', [x], { pads: [0, 2, 1, 0, 0, 2], mode: 'reflect' }));
    out('pad_edge', b.op('pad', [x], { pads: [1, 0, 2, 0, 1, 1], mode: 'edge' }));
    out('tile', b.op('tile', [x], { repeats: [1, 2, 2] }));
    const start = b.input('mv_start', 'int32', []);
    out('dynamic_slice', b.op('dynamic_slice', [x, start], { axis: 2, size: 2 }));
    out('dynamic_update', b.op('dynamic_update_slice', [x, b.op('slice', [x], { starts: [0], ends: [2], axes: [2] }), start], { axis: 2 }));
    out('slice_grad', b.op('slice_grad', [b.op('slice', [x], { starts: [3], ends: [0], axes: [2], steps: [-2] })], { shape: [2, 3, 4], starts: [3], ends: [0], axes: [2], steps: [-2] }));
    const bx = b.input('mv_bool', 'bool', [2, 3]);
    out('bool_transpose', b.op('transpose', [bx]));
  },
  random: (b) => {
    const x = f32(b, 'rn_x', [4, 50]);
    const [y, mask] = b.ops('dropout', [x], { ratio: 0.3, seed: 5 });
    b.output('rn.dropout', y!);
    b.output('rn.mask', mask!);
    b.output('rn.normal', b.op('random_normal', [], { dtype: 'float32', shape: [3, 33], mean: 1, std: 2, seed: 9 }));
    b.output('rn.uniform', b.op('random_uniform', [], { dtype: 'float16', shape: [70], low: -1, high: 3, seed: 4 }));
    const [ye] = b.ops('dropout', [x], { ratio: 0.3, training: false });
    b.output('rn.eval', ye!);
  },
  annotation: (b) => {
    const x = f32(b, 'an_x', [2, 3]);
    b.output('an.mean', b.op('identity_loss', [x]));
    b.output('an.sum', b.op('identity_loss', [x], { reduction: 'sum' }));
    b.output('an.none', b.op('identity_loss', [b.op('identity', [x])], { reduction: 'none' }));
    const p = b.op('ipu_print_tensor', [b.op('nop', [b.op('mul', [x, b.scalar('float32', 2)])])], { title: 'doubled' });
    b.output('an.printed', b.op('recomputation_checkpoint', [b.op('set_available_memory', [p], { proportion: 0.3 })]));
  },
};

/** One module running every family's graph once per step, two steps per run. */
export function opsModule(): Module {
  const graphs = new Map<string, Graph>();
  for (const [name, build] of Object.entries(FAMILIES)) {
    const b = new GraphBuilder(name);
    build(b);
    graphs.set(name, b.graph);
  }
  const inputs = new Set<string>();
  for (const g of graphs.values()) for (const op of g.inputs()) inputs.add(op.attrs['name'] as string);
  return {
    name: 'ops',
    graphs,
    program: seq(streamIn([...inputs]), ...[...graphs.keys()].map((g) => execute(g))),
    replicationFactor: 1,
    variables: collectVariables(graphs),
  };
}

export function opsFeeds(m: Module, run: number): Record<string, Tensor[]> {
  const out: Record<string, Tensor[]> = {};
  moduleInputs(m).forEach((s, i) => {
    if (s.name === 'mv_idx') out[s.name] = [Tensor.from('int32', [2, 2], run === 0 ? [0, -1, 2, 0] : [1, 1, -3, 2])];
    else if (s.name === 'mv_start') out[s.name] = [Tensor.scalar('int32', run === 0 ? 1 : 7)];
    else if (s.name === 'i_b') out[s.name] = [Tensor.from('int32', [6], [3, -2, 0, 7, -1, 1])];
    else out[s.name] = [randomTensor(s.dtype, s.shape, 100 * run + i + 1, s.dtype === 'int32' ? -9 : -2, s.dtype === 'int32' ? 9 : 2)];
  });
  return out;
}

