import { DiagnosticError, Tensor, TensorType, allocData, error, formatShape, numElements, shapesEqual } from '@tilegraph/ir';

/**
 * Host-side data layout of a run, as PopTorch defines it: a run consumes
 * deviceIterations × gradientAccumulation × inputGroups micro-batches (inputGroups is the
 * replication factor, or replicas / inputReplicaGrouping size), laid out as
 * [deviceIterations, gradientAccumulation, inputGroups, microBatch, ...] along the first dim.
 */
export interface RunLayout {
  readonly deviceIterations: number;
  readonly accumulation: number;
  readonly replicas: number;
  /** Input group of each replica (replicas of one group read the same micro-batch). */
  readonly inputGroupOf: readonly number[];
  readonly inputGroups: number;
}

/** Micro-batches per run of one input stream. */
export function microBatchesPerRun(l: RunLayout): number {
  return l.deviceIterations * l.accumulation * l.inputGroups;
}

/** The shape of one run's value of an input whose micro-batches have type `part` (scalars stack into [n]). */
export function runShape(part: TensorType, n: number): number[] {
  return part.shape.length === 0 ? [n] : [n * part.shape[0]!, ...part.shape.slice(1)];
}

/**
 * Splits the first dimension of `t` into `n` equal parts (a scalar per part when the part type is
 * a scalar): copies, or with `views` parts sharing t's data.
 */
export function splitBatch(name: string, t: Tensor, part: TensorType, n: number, views = false): Tensor[] {
  const want = runShape(part, n);
  if (t.dtype !== part.dtype || !shapesEqual(t.shape, want)) {
    const per = `${part.dtype}${formatShape(part.shape)}`;
    throw new DiagnosticError(
      error(`input '${name}': expected ${part.dtype}${formatShape(want)} (${n} micro-batches of ${per}) but got ${t.dtype}${formatShape(t.shape)}`, undefined, [
        'a run consumes micro-batch × deviceIterations × gradientAccumulation × replicationFactor samples (replicas / input group size with inputReplicaGrouping)',
      ]),
    );
  }
  const size = numElements(part.shape);
  const out: Tensor[] = [];
  for (let i = 0; i < n; i++) out.push(new Tensor(part.dtype, part.shape, views ? t.data.subarray(i * size, (i + 1) * size) : t.data.slice(i * size, (i + 1) * size)));
  return out;
}

/** The stream a ModuleInterpreter reads: one entry per (step, replica), replica fastest. */
export function streamForReplicas(parts: readonly Tensor[], l: RunLayout): Tensor[] {
  const steps = l.deviceIterations * l.accumulation;
  const out: Tensor[] = [];
  for (let s = 0; s < steps; s++) for (let r = 0; r < l.replicas; r++) out.push(parts[s * l.inputGroups + l.inputGroupOf[r]!]!);
  return out;
}

/**
 * Stacks scalars into [n] or concatenates tensors along the first dimension. One part is returned
 * as it is, so a run of one micro-batch gives the model's declared output shapes (a scalar loss
 * stays a scalar, as the reference interpreter returns it).
 */
export function combine(parts: readonly Tensor[]): Tensor {
  const first = parts[0]!;
  if (parts.length === 1) return first;
  const size = first.size;
  const data = allocData(first.dtype, size * parts.length);
  parts.forEach((p, i) => data.set(p.data as never, i * size));
  const shape = first.shape.length === 0 ? [parts.length] : [first.shape[0]! * parts.length, ...first.shape.slice(1)];
  return new Tensor(first.dtype, shape, data);
}

export type OutputSelection = { mode: 'All' } | { mode: 'Final' } | { mode: 'Sum' } | { mode: 'EveryN'; period: number };

/**
 * Selects the results a run returns from the values produced (one per micro-batch and
 * replica, in order (deviceIteration, accumulation step, replica)): All returns every one;
 * Final the last device iteration's last micro-batch of each replica; Sum each replica's sum over
 * the run; EveryN the micro-batches of every N-th device iteration.
 */
export function selectOutputs(values: readonly Tensor[], sel: OutputSelection, l: { deviceIterations: number; accumulation: number; replicas: number }): Tensor {
  const R = l.replicas;
  const perIteration = l.accumulation * R;
  switch (sel.mode) {
    case 'All':
      return combine(values);
    case 'Final':
      return combine(values.slice(values.length - R));
    case 'EveryN': {
      const picked: Tensor[] = [];
      for (let d = sel.period - 1; d < l.deviceIterations; d += sel.period) picked.push(...values.slice(d * perIteration, (d + 1) * perIteration));
      if (picked.length === 0) throw new DiagnosticError(error(`outputMode EveryN(${sel.period}) returns nothing with deviceIterations ${l.deviceIterations}`));
      return combine(picked);
    }
    case 'Sum': {
      const sums: Tensor[] = [];
      for (let r = 0; r < R; r++) {
        const first = values[r]!;
        const acc = new Float64Array(first.size);
        for (let k = r; k < values.length; k += R) {
          const v = values[k]!;
          for (let i = 0; i < acc.length; i++) acc[i]! += v.data[i]!;
        }
        sums.push(Tensor.from(first.dtype, first.shape, acc));
      }
      return combine(sums);
    }
  }
}
