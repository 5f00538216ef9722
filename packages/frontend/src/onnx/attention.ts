import { Tensor, Value } from '@tilegraph/ir';
import { Emitter, MAX_FOLD_ELEMENTS, NodeContext } from './context.js';
import { irDTypeOf } from './tensor.js';

/** Attention-23/24 and RotaryEmbedding-23 written with matmul, softmax and element-wise ops. */

function reshape(e: Emitter, v: Value, shape: readonly number[]): Value {
  const cur = v.type.shape;
  if (cur.length === shape.length && cur.every((d, i) => d === shape[i])) return v;
  return e.op('reshape', [v], { shape: [...shape] });
}

/** [B, S, H·D] → [B, H, S, D] */
function splitHeads(c: NodeContext, v: Value, heads: number, what: string): Value {
  const [b, s, hd] = v.type.shape as [number, number, number];
  if (!(heads > 0) || hd % heads !== 0) c.fail(`${what} width ${hd} is not a multiple of the ${heads} heads`);
  return c.e.op('transpose', [reshape(c.e, v, [b, s, heads, hd / heads])], { perm: [0, 2, 1, 3] });
}

/** -inf where `allowed` is false, 0 where true, in dtype `like`. */
function maskBias(e: Emitter, allowed: Value, like: Value): Value {
  return e.op('where', [allowed, e.like(like, 0), e.like(like, -Infinity)]);
}

export function attention(c: NodeContext): (Value | undefined)[] {
  const e = c.e;
  let q = c.input(0);
  let k = c.input(1);
  let v = c.input(2);
  const mask = c.optInput(3);
  const pastKey = c.optInput(4);
  const pastValue = c.optInput(5);
  const nonpad = c.opset >= 24 ? c.optInput(6) : undefined;
  const rank = q.type.shape.length;
  if (rank !== 3 && rank !== 4) c.fail(`Q must be 3-D or 4-D, got rank ${rank}`);
  if (k.type.shape.length !== rank || v.type.shape.length !== rank) c.fail(`Q, K and V must have the same rank`);
  if (rank === 3) {
    const qh = c.int('q_num_heads');
    const kvh = c.int('kv_num_heads');
    q = splitHeads(c, q, qh, 'Q');
    k = splitHeads(c, k, kvh, 'K');
    v = splitHeads(c, v, kvh, 'V');
  }
  const [batch, qHeads, qLen, headSize] = q.type.shape as [number, number, number, number];
  const scale = c.has('scale') ? c.float('scale') : 1 / Math.sqrt(headSize);
  const s = e.like(q, Math.sqrt(scale));
  const presentKey = pastKey ? e.op('concat', [pastKey, k], { axis: 2 }) : k;
  const presentValue = pastValue ? e.op('concat', [pastValue, v], { axis: 2 }) : v;
  k = presentKey;
  v = presentValue;
  const kvLen = k.type.shape[2]!;
  const pastLen = pastKey ? pastKey.type.shape[2]! : 0;
  // the masks below are built at import: their size is bounded like any folded constant
  const table = (n: number) => {
    if (n > MAX_FOLD_ELEMENTS) c.unsupported(`the attention mask would need a table of ${n} entries, more than the importer builds (${MAX_FOLD_ELEMENTS})`);
  };

  // the additive bias: mask (padded to the key length), causal frontier, key padding
  let m = mask;
  if (m) {
    const padWidth = kvLen - m.type.shape[m.type.shape.length - 1]!;
    if (padWidth > 0) {
      const r = m.type.shape.length;
      const pads = new Array<number>(2 * r).fill(0);
      pads[2 * r - 1] = padWidth;
      m = e.op('pad', [m], { pads, value: m.type.dtype === 'bool' ? 0 : -Infinity });
    }
    if (m.type.dtype === 'bool') m = maskBias(e, m, q);
  }
  let bias: Value | undefined = m;
  if (c.int('is_causal', 0) !== 0) {
    if (!pastKey && nonpad) {
      // per-batch frontier: key j is visible to query i when j <= i + nonpad[b] - qLen
      table(Math.max(qLen, kvLen));
      const offs = e.sub(e.cast(nonpad, 'int32'), e.scalar('int32', qLen));
      const i = e.constant(Tensor.from('int32', [1, qLen, 1], [...Array(qLen).keys()]));
      const j = e.constant(Tensor.from('int32', [1, 1, kvLen], [...Array(kvLen).keys()]));
      const frontier = e.add(i, reshape(e, offs, [batch, 1, 1]));
      const allowed = e.op('not', [e.op('greater', [j, frontier])]);
      const causal = reshape(e, maskBias(e, allowed, q), [batch, 1, qLen, kvLen]);
      bias = bias ? e.add(bias, causal) : causal;
    } else {
      table(qLen * kvLen);
      const allowed = Tensor.zeros('bool', [qLen, kvLen]);
      for (let i = 0; i < qLen; i++) for (let j = 0; j < kvLen; j++) allowed.data[i * kvLen + j] = j - pastLen > i ? 0 : 1;
      const causal = maskBias(e, e.constant(allowed), q);
      bias = bias ? e.add(bias, causal) : causal;
    }
  }
  if (nonpad) {
    table(kvLen);
    const j = e.constant(Tensor.from('int32', [1, kvLen], [...Array(kvLen).keys()]));
    const valid = e.op('less', [j, reshape(e, e.cast(nonpad, 'int32'), [batch, 1])]);
    const padding = reshape(e, maskBias(e, valid, q), [batch, 1, 1, kvLen]);
    bias = bias ? e.add(bias, padding) : padding;
  }

  // grouped-query attention: each KV head serves qHeads/kvHeads consecutive query heads
  const kvHeads = k.type.shape[1]!;
  if (qHeads !== kvHeads) {
    if (qHeads % kvHeads !== 0) c.fail(`${qHeads} query heads are not a multiple of ${kvHeads} key/value heads`);
    const reps = qHeads / kvHeads;
    const idx = e.ints(Array.from({ length: qHeads }, (_, h) => Math.floor(h / reps)));
    k = e.op('gather', [k, idx], { axis: 1 });
    v = e.op('gather', [v, idx], { axis: 1 });
  }
  let qk = e.op('matmul', [e.mul(q, s), e.op('transpose', [e.mul(k, s)], { perm: [0, 1, 3, 2] })]);
  const softcap = c.float('softcap', 0);
  if (softcap > 0) qk = e.mul(e.unary('tanh', e.div(qk, e.like(qk, softcap))), e.like(qk, softcap));
  const withBias = bias ? e.add(qk, bias) : qk;
  const precision = c.has('softmax_precision') ? irDTypeOf(c.int('softmax_precision')) : undefined;
  const probsIn = precision && precision !== withBias.type.dtype ? e.cast(withBias, precision) : withBias;
  let probs = e.cast(e.op('softmax', [probsIn], { axis: -1 }), q.type.dtype);
  if (bias) {
    // a query that may see no key at all attends to nothing: its row is zeros, not NaN
    const rowMax = e.op('reduce_max', [withBias], { axes: [-1], keepdims: true });
    probs = e.op('where', [e.op('equal', [rowMax, e.like(rowMax, -Infinity)]), e.like(probs, 0), probs]);
  }
  const mode = c.int('qk_matmul_output_mode', 0);
  const qkOut = mode === 2 ? withBias : mode === 3 ? probs : qk;
  let y = e.op('matmul', [probs, v]);
  if (rank === 3) {
    const t = e.op('transpose', [y], { perm: [0, 2, 1, 3] });
    y = reshape(e, t, [batch, qLen, qHeads * y.type.shape[3]!]);
  }
  return [y, presentKey, presentValue, qkOut];
}

export function rotaryEmbedding(c: NodeContext): Value {
  const e = c.e;
  const x = c.input(0);
  let cos = c.input(1);
  let sin = c.input(2);
  const positions = c.optInput(3);
  const interleaved = c.int('interleaved', 0) !== 0;
  const rank = x.type.shape.length;
  // work on [B, S, H, D]
  let t: Value;
  if (rank === 4) t = e.op('transpose', [x], { perm: [0, 2, 1, 3] });
  else if (rank === 3) {
    const heads = c.int('num_heads', 0);
    const [b, sl, hd] = x.type.shape as [number, number, number];
    if (!(heads > 0) || hd % heads !== 0) c.fail(`num_heads must divide the hidden size ${hd}`);
    t = reshape(e, x, [b, sl, heads, hd / heads]);
  } else return c.fail(`input must be 3-D or 4-D, got rank ${rank}`);
  const [b, sl, h, d] = t.type.shape as [number, number, number, number];
  let rd = c.int('rotary_embedding_dim', 0);
  if (rd === 0) rd = d;
  if (rd > d || rd % 2 !== 0) c.fail(`rotary_embedding_dim ${rd} must be even and at most the head size ${d}`);
  const half = rd / 2;
  if (positions) {
    cos = e.op('gather', [cos, e.cast(positions, 'int32')], { axis: 0 });
    sin = e.op('gather', [sin, e.cast(positions, 'int32')], { axis: 0 });
  }
  if (cos.type.shape[cos.type.shape.length - 1] !== half) c.fail(`the cos/sin caches must have ${half} entries per position`);
  cos = e.op('unsqueeze', [cos], { axes: [cos.type.shape.length - 1] });
  sin = e.op('unsqueeze', [sin], { axes: [sin.type.shape.length - 1] });
  const rot = rd === d ? t : e.op('slice', [t], { starts: [0], ends: [rd], axes: [3] });
  let x1: Value;
  let x2: Value;
  if (interleaved) {
    x1 = e.op('slice', [rot], { starts: [0], ends: [rd], axes: [3], steps: [2] });
    x2 = e.op('slice', [rot], { starts: [1], ends: [rd], axes: [3], steps: [2] });
  } else {
    [x1, x2] = e.ops('split', [rot], { axis: 3, sizes: [half, half] }) as [Value, Value];
  }
  const real = e.sub(e.mul(cos, x1), e.mul(sin, x2));
  const imag = e.add(e.mul(sin, x1), e.mul(cos, x2));
  let rotated: Value;
  if (interleaved) {
    const pair = e.op('concat', [e.op('unsqueeze', [real], { axes: [4] }), e.op('unsqueeze', [imag], { axes: [4] })], { axis: 4 });
    rotated = reshape(e, pair, [b, sl, h, rd]);
  } else rotated = e.op('concat', [real, imag], { axis: 3 });
  const out = rd === d ? rotated : e.op('concat', [rotated, e.op('slice', [t], { starts: [rd], ends: [d], axes: [3] })], { axis: 3 });
  return rank === 4 ? e.op('transpose', [out], { perm: [0, 2, 1, 3] }) : reshape(e, out, x.type.shape);
}

/**
 * TensorScatter-24 (a key/value cache update): update[b] is written into past_cache[b] along
 * `axis` from position write_indices[b] on (wrapping around in circular mode). Written as a
 * one-hot selection over the sequence axis, since the positions are known only at run time.
 */
export function tensorScatter(c: NodeContext): Value {
  const e = c.e;
  const cache = c.input(0);
  const update = c.input(1);
  const shape = [...cache.type.shape];
  const r = shape.length;
  const axisAttr = c.int('axis', -2);
  const axis = axisAttr < 0 ? axisAttr + r : axisAttr;
  if (r < 2 || axis < 1 || axis >= r) c.fail(`axis ${axisAttr} must name a dimension after the batch of a rank-${r} cache`);
  const mode = c.string('mode', 'linear');
  if (mode !== 'linear' && mode !== 'circular') c.fail(`mode must be 'linear' or 'circular', got '${mode}'`);
  const ushape = [...update.type.shape];
  if (ushape.length !== r || ushape.some((d, i) => i !== axis && d !== shape[i]) || ushape[axis]! > shape[axis]!) {
    c.fail(`update [${ushape.join(',')}] must match past_cache [${shape.join(',')}] except along axis ${axis}, where it may be shorter`);
  }
  const [b, max, seq] = [shape[0]!, shape[axis]!, ushape[axis]!];
  const w = c.optInput(2);
  const start = w ? reshape(e, e.cast(w, 'int32'), [b, 1, 1]) : e.scalar('int32', 0);
  // offset[b, p, i] = p - write_indices[b] (mod max in circular mode) compared with i
  const pos = e.constant(Tensor.from('int32', [1, max, 1], [...Array(max).keys()]));
  let offset = e.sub(pos, start);
  if (mode === 'circular') offset = e.op('where', [e.op('less', [offset, e.scalar('int32', 0)]), e.add(offset, e.scalar('int32', max)), offset]);
  const sel = e.op('equal', [offset, e.constant(Tensor.from('int32', [1, 1, seq], [...Array(seq).keys()]))]); // [B, max, seq]
  // move the axis last: cache [B, ..., max], update [B, ..., 1, seq]
  const perm = [...Array(r).keys()].filter((d) => d !== axis).concat([axis]);
  const inverse = perm.map((_, i) => perm.indexOf(i));
  const ones = new Array<number>(r - 2).fill(1);
  const upd = e.op('unsqueeze', [e.op('transpose', [update], { perm })], { axes: [r - 1] });
  const sel4 = reshape(e, sel, [b, ...ones, max, seq]);
  const picked = e.op('reduce_sum', [e.op('where', [sel4, upd, e.like(update, 0)])], { axes: [-1], keepdims: false });
  const written = e.op('greater', [e.op('reduce_sum', [e.cast(sel4, 'int32')], { axes: [-1], keepdims: false }), e.scalar('int32', 0)]);
  const out = e.op('where', [written, picked, e.op('transpose', [cache], { perm })]);
  return e.op('transpose', [out], { perm: inverse });
}

/**
 * FlexAttention (ai.onnx.preview): softmax(scale · Q Kᵀ) V over (B, H, S, D) tensors, with the
 * graph attributes score_mod and mask_mod applied to the scores and prob_mod to the
 * probabilities (each a graph from one tensor to one tensor, inlined). Key/value heads are
 * shared by groups of query heads. Computed in float32; the modifier graphs see the input type.
 */
export function flexAttention(c: NodeContext): Value {
  const e = c.e;
  const [q, k, v] = [c.input(0), c.input(1), c.input(2)];
  for (const [x, what] of [[q, 'Q'], [k, 'K'], [v, 'V']] as const) if (x.type.shape.length !== 4) c.fail(`${what} must be (batch, heads, sequence, head size), got [${x.type.shape.join(',')}]`);
  const [b, hq, , d] = q.type.shape as [number, number, number, number];
  const [kb, hkv, s, kd] = k.type.shape as [number, number, number, number];
  if (kb !== b || kd !== d || v.type.shape[0] !== b || v.type.shape[1] !== hkv || v.type.shape[2] !== s) c.fail(`K and V must be (${b}, kv heads, sequence, ${d} / value size) with one sequence length`);
  if (hq % hkv !== 0) c.fail(`the ${hq} query heads are not a multiple of the ${hkv} key/value heads`);
  const dtype = q.type.dtype;
  const f32 = (x: Value) => e.cast(x, 'float32');
  const shared = (x: Value) => {
    if (hq === hkv) return f32(x);
    const [, , len, dim] = x.type.shape as number[];
    const rep = e.op('expand', [e.op('unsqueeze', [x], { axes: [2] })], { shape: [b, hkv, hq / hkv, len!, dim!] });
    return f32(reshape(e, rep, [b, hq, len!, dim!]));
  };
  const scale = c.has('scale') ? c.float('scale') : 1 / Math.sqrt(d);
  const modify = (attr: string, x: Value): Value => {
    if (!c.has(attr)) return x;
    if (c.subgraphInputs(attr) !== 1 || c.subgraphOutputs(attr) !== 1) c.fail(`graph attribute '${attr}' must take one tensor and give one`);
    return f32(c.subgraph(attr, [e.cast(x, dtype)])[0]!);
  };
  let scores = e.mul(e.op('matmul', [f32(q), e.op('transpose', [shared(k)], { perm: [0, 1, 3, 2] })]), e.scalar('float32', scale));
  scores = modify('mask_mod', modify('score_mod', scores));
  const probs = modify('prob_mod', e.op('softmax', [scores], { axis: -1 }));
  return e.cast(e.op('matmul', [probs, shared(v)]), dtype);
}
