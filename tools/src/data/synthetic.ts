import { Graph, Op, Rng, Tensor, TensorType, Value, isFloat, numElements } from '@tilegraph/ir';
import type { Dataset, Sample } from '@tilegraph/runtime';

/** Ops that pass values through unchanged in meaning: an input read through them keeps its role. */
const TRANSPARENT = new Set(['reshape', 'flatten', 'squeeze', 'unsqueeze', 'cast', 'identity', 'transpose', 'slice', 'expand', 'concat']);

/** A class-index input of a loss, with the loss's class scores. */
export interface LabelInput {
  readonly classes: number;
  readonly ignore?: number;
  /** The graph output holding the class scores the loss reads, when it is an output. */
  readonly logits?: string;
}

/** What the model does with its integer inputs. */
export interface InputRoles {
  /** Class indices of a cross_entropy / nll_loss. */
  readonly labels: ReadonlyMap<string, LabelInput>;
  /** Other integer inputs; the size of the table a gather (embedding) reads them into, when one does. */
  readonly tokens: ReadonlyMap<string, number | undefined>;
}

/** The uses of `v`, looking through ops that only move or reshape it. */
function usesThrough(v: Value, seen = new Set<Value>()): { op: Op; index: number }[] {
  if (seen.has(v)) return [];
  seen.add(v);
  const out: { op: Op; index: number }[] = [];
  for (const u of v.uses) {
    if (TRANSPARENT.has(u.op.kind)) for (const r of u.op.results) out.push(...usesThrough(r, seen));
    else out.push(u);
  }
  return out;
}

/** Ops over the class dimension that keep its arg-max: the scores before them name the same class. */
const ARGMAX_PRESERVING = new Set(['log_softmax', 'softmax']);

/** The graph output holding `v` or the scores it was computed from by ops that keep the arg-max. */
function outputOf(g: Graph, v: Value): string | undefined {
  for (;;) {
    const out = g.outputs.find((o) => o.value === v);
    if (out) return out.name;
    const p = v.producer;
    if (!(TRANSPARENT.has(p.kind) || ARGMAX_PRESERVING.has(p.kind)) || p.operands.length !== 1) return undefined;
    v = p.operands[0]!;
  }
}

export function inputRoles(g: Graph): InputRoles {
  const labels = new Map<string, LabelInput>();
  const tokens = new Map<string, number | undefined>();
  for (const op of g.inputs()) {
    const { dtype } = op.result.type;
    if (isFloat(dtype) || dtype === 'bool') continue;
    const name = op.attrs['name'] as string;
    const uses = usesThrough(op.result);
    const loss = uses.find((u) => (u.op.kind === 'cross_entropy' || u.op.kind === 'nll_loss') && u.index === 1);
    if (loss) {
      const scores = loss.op.operands[0]!;
      const shape = scores.type.shape;
      const out = outputOf(g, scores);
      const ignore = loss.op.attrs['ignore_index'] as number | undefined;
      labels.set(name, { classes: shape.length === 1 ? shape[0]! : shape[1]!, ...(ignore !== undefined ? { ignore } : {}), ...(out !== undefined ? { logits: out } : {}) });
      continue;
    }
    const gather = uses.find((u) => u.op.kind === 'gather' && u.index === 1);
    if (gather) {
      const table = gather.op.operands[0]!.type.shape;
      const rank = table.length;
      const axis = ((gather.op.attrs['axis'] as number) + rank) % rank;
      tokens.set(name, table[axis]);
    } else tokens.set(name, undefined);
  }
  return { labels, tokens };
}

/**
 * A learnable synthetic classification task. Float inputs are standard normal; token inputs
 * (integers an embedding reads) are uniform over the table's rows (else over [0, intHigh));
 * bools alternate; each label input is the arg-max of a fixed random "teacher": a linear map of
 * the first float input (its first 64 features), or, for models that read only tokens, a score
 * per token id summed over the sequence (a bag of words), which an embedding can learn.
 */
export class TeacherDataset implements Dataset {
  readonly length: number;
  private readonly samples: Record<string, number[]>[] = [];
  private readonly types: Record<string, { dtype: Tensor['dtype']; shape: number[] }> = {};

  constructor(g: Graph, length: number, classes: number, seed: number, intHigh = 2) {
    this.length = length;
    const rng = new Rng(seed, 7);
    const roles = inputRoles(g);
    const inputs = g.inputs().map((o) => ({ name: o.attrs['name'] as string, type: o.result.type as TensorType }));
    const sizeOf = (t: TensorType) => numElements(t.shape.slice(1));
    const floats = inputs.filter((i) => isFloat(i.type.dtype));
    const tokenInputs = inputs.filter((i) => roles.tokens.has(i.name));
    const highOf = (name: string) => Math.max(1, roles.tokens.get(name) ?? intHigh);
    // the teacher reads at most the first 64 features, so its size stays small for wide inputs
    const features = Math.min(64, floats[0] ? sizeOf(floats[0].type) : 0);
    const classesOf = (name: string) => roles.labels.get(name)?.classes ?? classes;
    const maxClasses = Math.max(classes, ...[...roles.labels.values()].map((l) => l.classes));
    const teacher = Float64Array.from({ length: maxClasses * features }, () => rng.normal());
    const bag = tokenInputs[0] && !floats[0] ? Float64Array.from({ length: maxClasses * highOf(tokenInputs[0].name) }, () => rng.normal()) : undefined;
    for (const i of inputs) this.types[i.name] = { dtype: i.type.dtype, shape: i.type.shape.slice(1) };
    for (let n = 0; n < length; n++) {
      const s: Record<string, number[]> = {};
      for (const i of inputs) {
        const size = sizeOf(i.type);
        if (isFloat(i.type.dtype)) s[i.name] = Array.from({ length: size }, () => rng.normal());
        else if (i.type.dtype === 'bool') s[i.name] = Array.from({ length: size }, (_, k) => (k + n) % 2);
        else if (roles.tokens.has(i.name)) {
          const high = highOf(i.name);
          s[i.name] = Array.from({ length: size }, () => rng.nextU32() % high);
        }
      }
      const argmax = (k: number): number => {
        let best = 0;
        let bestScore = -Infinity;
        for (let c = 0; c < k; c++) {
          let score = 0;
          if (bag) {
            const V = bag.length / maxClasses;
            for (const t of s[tokenInputs[0]!.name]!) score += bag[c * V + t]!;
          } else {
            const x = floats[0] ? s[floats[0].name]! : [];
            for (let f = 0; f < features; f++) score += teacher[c * features + f]! * x[f]!;
          }
          if (score > bestScore) [best, bestScore] = [c, score];
        }
        return best;
      };
      for (const i of inputs) {
        if (s[i.name] === undefined) {
          const label = argmax(classesOf(i.name));
          s[i.name] = Array.from({ length: sizeOf(i.type) }, () => label);
        }
      }
      this.samples.push(s);
    }
  }

  get(index: number): Sample {
    const s = this.samples[index]!;
    return Object.fromEntries(Object.entries(this.types).map(([name, { dtype, shape }]) => [name, Tensor.from(dtype, shape, s[name]!)]));
  }

  /** The samples at `indices`, stacked along a new first dimension per input. */
  batch(indices: readonly number[]): Record<string, Tensor> {
    const out: Record<string, Tensor> = {};
    for (const [name, { dtype, shape }] of Object.entries(this.types)) {
      const values: number[] = [];
      for (const k of indices) values.push(...this.samples[k]![name]!);
      out[name] = Tensor.from(dtype, [indices.length, ...shape], values);
    }
    return out;
  }
}
