import { Value } from '@tilegraph/ir';
import { NodeContext } from './context.js';

/** Sequence ops that carry a state between calls (opset 27), as small graphs of IR ops. */

/**
 * CausalConvWithState: per channel, seq = concat(past_state or zeros, input) along time, and
 * output[t] = activation(bias + Σ_k weight[c, 0, k]·seq[t + k]); present_state keeps the last
 * k - 1 steps of seq.
 */
export function causalConvWithState(c: NodeContext): Value[] {
  const e = c.e;
  const dtype = c.input(0).type.dtype;
  // float16 is computed in float32 and rounded once, as the runtimes do
  const wide = (v: Value | undefined) => (v && v.type.dtype === 'float16' ? e.cast(v, 'float32') : v);
  const x = wide(c.input(0))!;
  const w = wide(c.input(1))!;
  const bias = wide(c.optInput(2));
  const past = wide(c.optInput(3));
  if (x.type.shape.length !== 3) c.fail(`input must be [batch, channels, length], got [${x.type.shape.join(',')}]`);
  const [b, ch, len] = x.type.shape as [number, number, number];
  if (w.type.shape.length !== 3 || w.type.shape[0] !== ch || w.type.shape[1] !== 1) c.fail(`weight must be [${ch}, 1, k], got [${w.type.shape.join(',')}]`);
  const k = w.type.shape[2]!;
  if (k < 1) c.fail(`the kernel size must be positive`);
  const act = c.string('activation', 'none');
  if (!['none', 'silu', 'swish'].includes(act)) c.fail(`activation must be 'silu', 'swish' or 'none', got '${act}'`);
  if (past && (past.type.shape.length !== 3 || past.type.shape[0] !== b || past.type.shape[1] !== ch || past.type.shape[2] !== k - 1)) {
    c.fail(`past_state must be [${b}, ${ch}, ${k - 1}], got [${past.type.shape.join(',')}]`);
  }
  const head = past ?? (k > 1 ? e.filled(x.type.dtype, [b, ch, k - 1], 0) : undefined);
  const seq = head ? e.op('concat', [head, x], { axis: 2 }) : x;
  let y: Value | undefined;
  for (let j = 0; j < k; j++) {
    const tap = e.op('slice', [seq], { starts: [j], ends: [j + len], axes: [2] });
    const wj = e.op('reshape', [e.op('slice', [w], { starts: [j], ends: [j + 1], axes: [2] })], { shape: [1, ch, 1] });
    const term = e.mul(tap, wj);
    y = y ? e.add(y, term) : term;
  }
  if (bias) y = e.add(y!, e.op('reshape', [bias], { shape: [1, ch, 1] }));
  if (act !== 'none') y = e.mul(y!, e.unary('sigmoid', y!));
  const present = k > 1 ? e.op('slice', [seq], { starts: [len], ends: [len + k - 1], axes: [2] }) : e.filled(x.type.dtype, [b, ch, 0], 0);
  return [e.cast(y!, dtype), e.cast(present, dtype)];
}
