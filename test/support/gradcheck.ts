import { GraphBuilder, Rng, Tensor, Value, getOpDef, isFloat, operandDifferentiable, completeAttrs } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';

export interface GradCheckOptions {
  /** Finite-difference step (central differences in float64). */
  eps?: number;
  rtol?: number;
  atol?: number;
  /** Seed of the random cotangents. */
  seed?: number;
}

export interface GradCheckResult {
  /** Worst |analytic - numeric| - atol - rtol·|numeric| over all checked elements (≤ 0 passes). */
  worst: number;
  message: string;
}

const ctx = { seed: 0, step: 0, print: () => {} };

/**
 * Checks an op's gradient rule against central finite differences of f(x) = Σ_k <v_k, y_k(x)>,
 * with random cotangents v_k, in float64. Inputs of the differentiable operands should be float64.
 * Returns the worst violation; throws when the rule is missing.
 */
export function gradCheck(opName: string, inputs: readonly Tensor[], attrs: Record<string, unknown> = {}, opts: GradCheckOptions = {}): GradCheckResult {
  const eps = opts.eps ?? 1e-6;
  const rtol = opts.rtol ?? 1e-5;
  const atol = opts.atol ?? 1e-7;
  const def = getOpDef(opName);
  if (!def) throw new Error(`no op ${opName}`);
  if (typeof def.grad !== 'function') throw new Error(`${opName} has no gradient rule`);
  const full = completeAttrs(def, attrs as never);

  // the op applied to graph inputs
  const b = new GraphBuilder('gradcheck');
  const xs = inputs.map((t, i) => b.input(`x${i}`, t.dtype, t.shape));
  const op = b.addOp(opName, xs, full);
  const rng = new Rng(opts.seed ?? 1);
  const feeds: Record<string, Tensor> = {};
  inputs.forEach((t, i) => (feeds[`x${i}`] = t));
  const cot: (Tensor | undefined)[] = op.results.map((r) => {
    if (!isFloat(r.type.dtype)) return undefined;
    const n = r.type.shape.reduce((a, d) => a * d, 1);
    return Tensor.from(r.type.dtype, r.type.shape, Array.from({ length: n }, () => rng.normal()));
  });
  const vs: (Value | undefined)[] = cot.map((c, k) => {
    if (!c) return undefined;
    feeds[`v${k}`] = c;
    return b.input(`v${k}`, c.dtype, c.shape);
  });
  const grads = def.grad({ b, op, inputs: xs, outputs: op.results, outputGrads: vs });
  grads.forEach((g, i) => {
    if (g) b.output(`g${i}`, g);
  });
  const analytic = runGraph(b.graph, feeds).outputs;

  const f = (args: Tensor[]): number => {
    const ys = def.kernel(args, full, ctx);
    let s = 0;
    ys.forEach((y, k) => {
      const c = cot[k];
      if (!c) return;
      for (let j = 0; j < y.size; j++) s += c.data[j]! * y.data[j]!;
    });
    return s;
  };

  let worst = -Infinity;
  let message = 'ok';
  inputs.forEach((t, i) => {
    if (!operandDifferentiable(def, i) || !isFloat(t.dtype)) return;
    const g = analytic[`g${i}`];
    if (g && (g.dtype !== t.dtype || g.shape.join(',') !== t.shape.join(','))) {
      worst = Infinity;
      message = `${opName}: gradient of operand ${i} is ${g.dtype}[${g.shape}] but the operand is ${t.dtype}[${t.shape}]`;
      return;
    }
    for (let j = 0; j < t.size; j++) {
      const plus = t.clone();
      const minus = t.clone();
      plus.data[j] = t.data[j]! + eps;
      minus.data[j] = t.data[j]! - eps;
      const args = [...inputs];
      args[i] = plus;
      const fp = f(args);
      args[i] = minus;
      const fm = f(args);
      const numeric = (fp - fm) / (2 * eps);
      const got = g ? g.data[j]! : 0;
      const violation = Math.abs(got - numeric) - atol - rtol * Math.abs(numeric);
      if (!(violation <= worst) || Number.isNaN(violation)) {
        if (Number.isNaN(violation) || violation > worst) {
          worst = Number.isNaN(violation) ? Infinity : violation;
          message = `${opName}: d/d operand ${i} element ${j}: rule gives ${got}, finite differences ${numeric}`;
        }
      }
    }
  });
  return { worst, message };
}

/** Fails with gradCheck's description of the worst element, the operand types and the attributes. */
export function expectGradOk(opName: string, inputs: readonly Tensor[], attrs: Record<string, unknown> = {}, opts: GradCheckOptions = {}): void {
  const r = gradCheck(opName, inputs, attrs, opts);
  if (!(r.worst <= 0)) {
    throw new Error(`${r.message} (violation ${r.worst}; inputs ${inputs.map((t) => `${t.dtype}[${t.shape}]`).join(', ')}; attrs ${JSON.stringify(attrs)})`);
  }
}

/** A float64 tensor: gradient checks run in float64. */
export const f64 = (shape: readonly number[], values: readonly number[]): Tensor => Tensor.from('float64', shape, values);
