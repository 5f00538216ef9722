import { Tensor, Value } from '@tilegraph/ir';
import { Emitter, NodeContext } from './context.js';
import * as d from './decompose.js';

/**
 * RNN, GRU and LSTM unrolled over the (static) sequence length: the input projections of all
 * steps are one matmul, each step adds the recurrent projection and applies the gates. Variable
 * sequence lengths freeze the state past a sequence's end and zero its outputs, as ONNX specifies.
 */

type Kind = 'RNN' | 'GRU' | 'LSTM';
const GATES: Record<Kind, number> = { RNN: 1, GRU: 3, LSTM: 4 };
const DEFAULT_ACTS: Record<Kind, string[]> = { RNN: ['Tanh'], GRU: ['Sigmoid', 'Tanh'], LSTM: ['Sigmoid', 'Tanh', 'Tanh'] };

type Act = (v: Value) => Value;

function activation(c: NodeContext, name: string, alpha: number | undefined, beta: number | undefined): Act {
  const e = c.e;
  switch (name.toLowerCase()) {
    case 'tanh':
      return (v) => e.unary('tanh', v);
    case 'sigmoid':
      return (v) => e.unary('sigmoid', v);
    case 'relu':
      return (v) => e.unary('relu', v);
    case 'leakyrelu':
      return (v) => d.leakyRelu(e, v, alpha ?? 0.01);
    case 'thresholdedrelu':
      return (v) => d.thresholdedRelu(e, v, alpha ?? 1);
    case 'hardsigmoid':
      return (v) => d.hardSigmoid(e, v, alpha ?? 0.2, beta ?? 0.5);
    case 'elu':
      return (v) => d.elu(e, v, alpha ?? 1);
    case 'softsign':
      return (v) => d.softsign(e, v);
    case 'softplus':
      return (v) => d.softplus(e, v);
    case 'affine':
      return (v) => e.add(e.mul(v, e.like(v, alpha ?? 1)), e.like(v, beta ?? 0));
    case 'scaledtanh':
      return (v) => e.mul(e.unary('tanh', e.mul(v, e.like(v, beta ?? 1))), e.like(v, alpha ?? 1));
    default:
      return c.unsupported(`activation '${name}' is not supported`);
  }
}

function take(e: Emitter, v: Value, index: number, axis = 0): Value {
  return e.op('gather', [v, e.scalar('int32', index)], { axis });
}

function sliceLast(e: Emitter, v: Value, start: number, size: number): Value {
  return e.op('slice', [v], { starts: [start], ends: [start + size], axes: [v.type.shape.length - 1] });
}

export function recurrent(c: NodeContext, kind: Kind): (Value | undefined)[] {
  const e = c.e;
  let x = c.input(0);
  const w = c.input(1);
  const r = c.input(2);
  const b = c.optInput(3);
  const seqLens = c.optInput(4);
  const initH = c.optInput(5);
  const initC = kind === 'LSTM' ? c.optInput(6) : undefined;
  const peep = kind === 'LSTM' ? c.optInput(7) : undefined;
  const layout = c.int('layout', 0);
  const direction = c.string('direction', 'forward');
  const dirs = direction === 'bidirectional' ? 2 : 1;
  if (!['forward', 'reverse', 'bidirectional'].includes(direction)) c.fail(`unknown direction '${direction}'`);
  const hidden = c.int('hidden_size', w.type.shape[1]! / GATES[kind]);
  const G = GATES[kind];
  if (x.type.shape.length !== 3) c.fail(`X must be 3-D, got rank ${x.type.shape.length}`);
  if (layout) x = e.op('transpose', [x], { perm: [1, 0, 2] });
  const [seq, batch] = x.type.shape as [number, number, number];
  if (seq > 4096) c.unsupported(`sequences longer than 4096 steps are not unrolled`);
  const clip = c.has('clip') ? c.float('clip') : undefined;
  const names = c.has('activations') ? (c.rawAttr('activations')!.strings ?? []).map((s) => new TextDecoder().decode(s)) : [];
  const alphas = c.has('activation_alpha') ? c.floats('activation_alpha') : [];
  const betas = c.has('activation_beta') ? c.floats('activation_beta') : [];
  const per = DEFAULT_ACTS[kind].length;
  const acts = (dir: number): Act[] =>
    DEFAULT_ACTS[kind].map((def, i) => {
      const k = dir * per + i;
      return activation(c, names[k] ?? def, alphas[k], betas[k]);
    });
  const linearBeforeReset = kind === 'GRU' && c.int('linear_before_reset', 0) !== 0;
  if (kind === 'LSTM' && c.int('input_forget', 0) !== 0) c.unsupported(`input_forget is not supported`);
  const dtype = x.type.dtype;
  const zeroState = e.filled(dtype, [batch, hidden], 0);
  // step t of batch entry i is live while t < seqLens[i]
  const lens = seqLens ? e.op('unsqueeze', [e.cast(seqLens, 'int32')], { axes: [1] }) : undefined;
  const clipped = (v: Value) => (clip === undefined ? v : e.op('clip', [v], { min: -clip, max: clip }));

  const ys: Value[] = [];
  const hs: Value[] = [];
  const cs: Value[] = [];
  for (let dir = 0; dir < dirs; dir++) {
    const reverse = direction === 'reverse' || dir === 1;
    const [f, g, h] = acts(dir) as [Act, Act?, Act?];
    const wd = take(e, w, dir); // [G·h, in]
    const rd = take(e, r, dir); // [G·h, h]
    const rt = e.op('transpose', [rd], { perm: [1, 0] });
    let xw = e.op('matmul', [x, e.op('transpose', [wd], { perm: [1, 0] })]); // [seq, batch, G·h]
    let rb: Value | undefined;
    if (b) {
      const bd = take(e, b, dir); // [2·G·h]
      xw = e.add(xw, sliceLast(e, bd, 0, G * hidden));
      rb = sliceLast(e, bd, G * hidden, G * hidden);
    }
    let H = initH ? take(e, initH, dir) : zeroState;
    let C = initC ? take(e, initC, dir) : zeroState;
    const pd = peep ? take(e, peep, dir) : undefined;
    const steps = seq === 1 ? [xw] : e.ops('split', [xw], { axis: 0, sizes: new Array<number>(seq).fill(1) });
    const outs: Value[] = new Array(seq);
    for (let s = 0; s < seq; s++) {
      const t = reverse ? seq - 1 - s : s;
      const xt = e.op('squeeze', [steps[t]!], { axes: [0] }); // [batch, G·h]
      let newH: Value;
      let newC: Value | undefined;
      if (kind === 'RNN') {
        let pre = e.add(xt, e.op('matmul', [H, rt]));
        if (rb) pre = e.add(pre, rb);
        newH = f(clipped(pre));
      } else if (kind === 'GRU') {
        const gate = (k: number) => sliceLast(e, xt, k * hidden, hidden);
        const rgate = (k: number, hv: Value) => {
          const m = e.op('matmul', [hv, sliceLast(e, rt, k * hidden, hidden)]);
          return rb ? e.add(m, sliceLast(e, rb, k * hidden, hidden)) : m;
        };
        const z = f(clipped(e.add(gate(0), rgate(0, H))));
        const rr = f(clipped(e.add(gate(1), rgate(1, H))));
        const hh = linearBeforeReset ? e.add(gate(2), e.mul(rr, rgate(2, H))) : e.add(gate(2), rgate(2, e.mul(rr, H)));
        const cand = g!(clipped(hh));
        newH = e.add(e.mul(e.sub(e.like(z, 1), z), cand), e.mul(z, H));
      } else {
        let pre = e.add(xt, e.op('matmul', [H, rt]));
        if (rb) pre = e.add(pre, rb);
        const gate = (k: number) => sliceLast(e, pre, k * hidden, hidden);
        const peepOf = (k: number, cv: Value) => (pd ? e.mul(sliceLast(e, pd, k * hidden, hidden), cv) : undefined);
        const withPeep = (v: Value, p: Value | undefined) => (p ? e.add(v, p) : v);
        const i = f(clipped(withPeep(gate(0), peepOf(0, C))));
        const fg = f(clipped(withPeep(gate(2), peepOf(2, C))));
        const cc = g!(clipped(gate(3)));
        newC = e.add(e.mul(fg, C), e.mul(i, cc));
        const o = f(clipped(withPeep(gate(1), peepOf(1, newC))));
        newH = e.mul(o, h!(newC));
      }
      if (lens) {
        const live = e.op('less', [e.scalar('int32', t), lens]); // [batch, 1]
        outs[t] = e.op('where', [live, newH, e.like(newH, 0)]);
        H = e.op('where', [live, newH, H]);
        if (newC) C = e.op('where', [live, newC, C]);
      } else {
        outs[t] = newH;
        H = newH;
        if (newC) C = newC;
      }
    }
    ys.push(e.op('concat', outs.map((o) => e.op('unsqueeze', [o], { axes: [0] })), { axis: 0 })); // [seq, batch, h]
    hs.push(H);
    cs.push(C);
  }
  const stackDirs = (vs: Value[], axis: number) => e.op('concat', vs.map((v) => e.op('unsqueeze', [v], { axes: [axis] })), { axis });
  let Y = stackDirs(ys, 1); // [seq, dirs, batch, h]
  let Yh = stackDirs(hs, 0); // [dirs, batch, h]
  let Yc = stackDirs(cs, 0);
  if (layout) {
    Y = e.op('transpose', [Y], { perm: [2, 0, 1, 3] });
    Yh = e.op('transpose', [Yh], { perm: [1, 0, 2] });
    Yc = e.op('transpose', [Yc], { perm: [1, 0, 2] });
  }
  return kind === 'LSTM' ? [Y, Yh, Yc] : [Y, Yh];
}
