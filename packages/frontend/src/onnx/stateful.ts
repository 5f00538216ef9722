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

/** (B, T, H·D) → (B, H, T, D) in float32. */
function heads4(c: NodeContext, v: Value, heads: number, what: string): Value {
  const e = c.e;
  const [b, t, hd] = v.type.shape as [number, number, number];
  if (v.type.shape.length !== 3 || hd % heads !== 0) c.fail(`${what} must be (batch, time, ${heads}·dim), got [${v.type.shape.join(',')}]`);
  const r = e.op('reshape', [e.cast(v, 'float32')], { shape: [b, t, heads, hd / heads] });
  return e.op('transpose', [r], { perm: [0, 2, 1, 3] });
}

/** Steps the importer unrolls for LinearAttention. */
const MAX_LINEAR_ATTENTION_STEPS = 4096;

/**
 * LinearAttention (opset 27): the recurrence over time unrolled step by step, in float32 like
 * the specification's reference. The state S (B, H_kv, d_k, d_v) decays by exp(g_t) (gated
 * rules), has the value it already retrieves for k_t subtracted, scaled by beta_t (delta rules),
 * takes k_t ⊗ v_t, and is read by each query head of its group: o_t = scale · q_t S.
 */
export function linearAttention(c: NodeContext): Value[] {
  const e = c.e;
  const query = c.input(0);
  const hq = c.int('q_num_heads');
  const hkv = c.int('kv_num_heads');
  if (hq <= 0 || hkv <= 0 || hq % hkv !== 0) c.fail(`q_num_heads (${hq}) must be a positive multiple of kv_num_heads (${hkv})`);
  const rule = c.string('update_rule', 'gated_delta');
  if (!['linear', 'gated', 'delta', 'gated_delta'].includes(rule)) c.fail(`unknown update_rule '${rule}'`);
  const gating = rule === 'gated' || rule === 'gated_delta';
  const delta = rule === 'delta' || rule === 'gated_delta';
  const [pastIn, decayIn, betaIn, eraseIn] = [3, 4, 5, 6].map((i) => c.optInput(i));
  if (gating !== !!decayIn) c.fail(`update_rule '${rule}' ${gating ? 'needs' : 'takes no'} decay input`);
  if (delta !== !!betaIn) c.fail(`update_rule '${rule}' ${delta ? 'needs' : 'takes no'} beta input`);
  if (eraseIn && !delta) c.fail(`update_rule '${rule}' takes no erase_gate input`);
  if (c.has('chunk_size')) c.warn(`chunk_size is a tuning hint of chunked kernels; the recurrence here runs step by step, so it has no effect`);
  const [b, t] = query.type.shape as [number, number];
  if (t > MAX_LINEAR_ATTENTION_STEPS) c.unsupported(`${t} time steps are more than the importer unrolls (${MAX_LINEAR_ATTENTION_STEPS})`);
  const q = heads4(c, query, hq, 'query');
  const k = heads4(c, c.input(1), hkv, 'key');
  const v = heads4(c, c.input(2), hkv, 'value');
  const dk = q.type.shape[3]!;
  const dv = v.type.shape[3]!;
  if (k.type.shape[3] !== dk || k.type.shape[0] !== b || v.type.shape[0] !== b || k.type.shape[2] !== t || v.type.shape[2] !== t) {
    c.fail(`query, key and value must share batch and time, and key the query's head size ${dk}`);
  }
  const perHead = (x: Value | undefined, what: string, widths: number[]): Value | undefined => {
    if (!x) return undefined;
    const last = x.type.shape[2]!;
    if (x.type.shape.length !== 3 || !widths.includes(last)) c.fail(`${what} must be (batch, time, one of ${widths.join(' or ')}), got [${x.type.shape.join(',')}]`);
    return heads4(c, x, last === hkv * dk && widths.includes(hkv * dk) ? hkv : last, what);
  };
  const decay = perHead(decayIn, 'decay', [hkv, hkv * dk]); // (B, H_kv, T, 1 or d_k)
  const beta = perHead(betaIn, 'beta', [hkv, 1]); // (B, H_kv or 1, T, 1)
  const erase = eraseIn ? heads4(c, eraseIn, hkv, 'erase_gate') : undefined;
  if (pastIn && (pastIn.type.shape.length !== 4 || [b, hkv, dk, dv].some((d, i) => pastIn.type.shape[i] !== d))) {
    c.fail(`past_state must be [${b}, ${hkv}, ${dk}, ${dv}], got [${pastIn.type.shape.join(',')}]`);
  }
  const scaleAttr = c.float('scale', 0);
  const scale = scaleAttr === 0 ? 1 / Math.sqrt(dk) : scaleAttr;
  const group = hq / hkv;
  const step = (x: Value, i: number) => e.op('slice', [x], { starts: [i], ends: [i + 1], axes: [2] });
  const column = (x: Value) => e.op('transpose', [x], { perm: [0, 1, 3, 2] });
  let state = pastIn ? e.cast(pastIn, 'float32') : e.filled('float32', [b, hkv, dk, dv], 0);
  const outs: Value[] = [];
  for (let i = 0; i < t; i++) {
    const kt = step(k, i); // (B, H_kv, 1, d_k)
    let vt = step(v, i); // (B, H_kv, 1, d_v)
    if (decay) state = e.mul(state, column(e.unary('exp', step(decay, i))));
    if (beta) {
      const ke = erase ? e.mul(step(erase, i), kt) : kt;
      vt = e.mul(step(beta, i), e.sub(vt, e.op('matmul', [ke, state])));
    }
    state = e.add(state, e.mul(column(kt), vt));
    const read = group === 1 ? state : e.op('reshape', [e.op('expand', [e.op('unsqueeze', [state], { axes: [2] })], { shape: [b, hkv, group, dk, dv] })], { shape: [b, hq, dk, dv] });
    outs.push(e.op('matmul', [step(q, i), read])); // (B, H_q, 1, d_v)
  }
  const o = e.mul(outs.length === 1 ? outs[0]! : e.op('concat', outs, { axis: 2 }), e.scalar('float32', scale));
  const packed = e.op('reshape', [e.op('transpose', [o], { perm: [0, 2, 1, 3] })], { shape: [b, t, hq * dv] });
  return [e.cast(packed, query.type.dtype), e.cast(state, (pastIn ?? query).type.dtype)];
}
