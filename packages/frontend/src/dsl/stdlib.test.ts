import { Tensor, verifyGraph } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { compileModelSource } from './index.js';

/**
 * The standard library against plain float64 JavaScript written from PyTorch's definitions
 * (linear, LayerNorm, MultiheadAttention, post-norm TransformerEncoderLayer), with random
 * parameter values (so that norm weights are not 1 and biases not 0).
 */

type M = number[][];
const matmulT = (a: M, w: M): M => a.map((row) => w.map((wr) => wr.reduce((s, v, k) => s + v * row[k]!, 0)));
const addRow = (a: M, b: number[]): M => a.map((r) => r.map((v, j) => v + b[j]!));
const add = (a: M, b: M): M => a.map((r, i) => r.map((v, j) => v + b[i]![j]!));
function layerNorm(a: M, g: number[], b: number[], eps = 1e-5): M {
  return a.map((r) => {
    const mean = r.reduce((s, v) => s + v, 0) / r.length;
    const variance = r.reduce((s, v) => s + (v - mean) ** 2, 0) / r.length;
    return r.map((v, j) => ((v - mean) / Math.sqrt(variance + eps)) * g[j]! + b[j]!);
  });
}
function softmaxRows(a: M): M {
  return a.map((r) => {
    const m = Math.max(...r);
    const e = r.map((v) => Math.exp(v - m));
    const s = e.reduce((x, y) => x + y, 0);
    return e.map((v) => v / s);
  });
}
const rows = (t: Tensor, n: number): M => Array.from({ length: t.size / n }, (_, i) => Array.from(t.data.slice(i * n, (i + 1) * n)));
const cols = (a: M, from: number, to: number): M => a.map((r) => r.slice(from, to));

/** Self-attention of one sequence [seq, e]. */
function attention(x: M, p: Record<string, Tensor>, pre: string, e: number, heads: number): M {
  const qkv = addRow(matmulT(x, rows(p[`${pre}in_proj_weight`]!, e)), Array.from(p[`${pre}in_proj_bias`]!.data));
  const hd = e / heads;
  const out: M = x.map(() => []);
  for (let h = 0; h < heads; h++) {
    const q = cols(qkv, h * hd, (h + 1) * hd);
    const k = cols(qkv, e + h * hd, e + (h + 1) * hd);
    const v = cols(qkv, 2 * e + h * hd, 2 * e + (h + 1) * hd);
    const attn = softmaxRows(matmulT(q, k).map((r) => r.map((s) => s / Math.sqrt(hd))));
    const o = attn.map((r) => Array.from({ length: hd }, (_, j) => r.reduce((s, a, t) => s + a * v[t]![j]!, 0)));
    o.forEach((r, i) => out[i]!.push(...r));
  }
  return addRow(matmulT(out, rows(p[`${pre}out_proj.weight`]!, e)), Array.from(p[`${pre}out_proj.bias`]!.data));
}

function randomParams(g: ReturnType<typeof compileModelSource>, seed: number): Record<string, Tensor> {
  let s = seed;
  const next = () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s / 2 ** 32) * 2 - 1;
  };
  const out: Record<string, Tensor> = {};
  for (const p of g.parameters()) {
    const t = p.result.type;
    out[p.attrs['name'] as string] = Tensor.from('float32', t.shape, Array.from({ length: t.shape.reduce((a, b) => a * b, 1) }, () => 0.5 * next()));
  }
  return out;
}

describe('standard library layers', () => {
  test('transformer_encoder_layer = PyTorch post-norm encoder layer (with multi-head attention)', () => {
    const [B, S, E, H, F] = [2, 3, 4, 2, 6];
    const g = compileModelSource(
      `import "std/nn.tg"\nmodel t {\n  input x: f32[${B}, ${S}, ${E}]\n  output y = transformer_encoder_layer(x, ${E}, ${H}, dim_feedforward=${F}) as layer\n}\n`,
      't.tg',
    );
    expect(verifyGraph(g)).toEqual([]);
    expect(g.parameters().map((p) => p.attrs['name'])).toEqual([
      'layer.self_attn.in_proj_weight', 'layer.self_attn.in_proj_bias', 'layer.self_attn.out_proj.weight', 'layer.self_attn.out_proj.bias',
      'layer.norm1.weight', 'layer.norm1.bias', 'layer.linear1.weight', 'layer.linear1.bias', 'layer.linear2.weight', 'layer.linear2.bias',
      'layer.norm2.weight', 'layer.norm2.bias',
    ]);
    const params = randomParams(g, 7);
    const xs = Array.from({ length: B * S * E }, (_, i) => Math.sin(1.7 * i) * 1.5);
    const y = runGraph(g, { x: Tensor.from('float32', [B, S, E], xs) }, { parameters: params }).outputs['y']!;

    const v = (n: string) => Array.from(params[`layer.${n}`]!.data);
    for (let b = 0; b < B; b++) {
      const x = rows(Tensor.from('float32', [S, E], xs.slice(b * S * E, (b + 1) * S * E)), E);
      const x1 = layerNorm(add(x, attention(x, params, 'layer.self_attn.', E, H)), v('norm1.weight'), v('norm1.bias'));
      const hidden = addRow(matmulT(x1, rows(params['layer.linear1.weight']!, E)), v('linear1.bias')).map((r) => r.map((a) => Math.max(a, 0)));
      const ff = addRow(matmulT(hidden, rows(params['layer.linear2.weight']!, F)), v('linear2.bias'));
      const want = layerNorm(add(x1, ff), v('norm2.weight'), v('norm2.bias'));
      want.flat().forEach((w, k) => {
        const got = y.data[b * S * E + k]!;
        expect(Math.abs(got - w)).toBeLessThanOrEqual(1e-5 + 1e-4 * Math.abs(w));
      });
    }
  });

  test('mlp names its layers layers.0, layers.1 and puts the activation between them', () => {
    const g = compileModelSource('import "std/nn.tg"\nmodel t {\n  input x: f32[1, 2]\n  output y = mlp(x, [2, 3, 1], activation=tanh) as net\n}\n', 't.tg');
    expect(g.parameters().map((p) => p.attrs['name'])).toEqual(['net.layers.0.weight', 'net.layers.0.bias', 'net.layers.1.weight', 'net.layers.1.bias']);
    expect(g.ops.filter((o) => o.kind === 'tanh').length).toBe(1);
    const p = {
      'net.layers.0.weight': Tensor.from('float32', [3, 2], [1, 0, 0, 1, 1, 1]),
      'net.layers.0.bias': Tensor.from('float32', [3], [0, 0, 0]),
      'net.layers.1.weight': Tensor.from('float32', [1, 3], [1, 1, 1]),
      'net.layers.1.bias': Tensor.from('float32', [1], [0.5]),
    };
    // x = [0.5, -0.25]: hidden = tanh([0.5, -0.25, 0.25]); y = sum + 0.5 = tanh(0.5) + 0.5
    const y = runGraph(g, { x: Tensor.from('float32', [1, 2], [0.5, -0.25]) }, { parameters: p }).outputs['y']!;
    expect(y.data[0]).toBeCloseTo(Math.tanh(0.5) + 0.5, 6);
  });
});
