import { DType, Module, ProgramNode, Tensor, VariableInfo, allReduce, roundToHalf } from '@tilegraph/ir';
import { ModuleInterpreter, groupSum } from './module.js';

/**
 * The reference's cross-replica sums are the IPU's: in the variable's own type, in replica order
 * within each group, every partial sum rounded (the emulated target's GCL collectives do the
 * same, poplar-host/tests/collective_sums.cpp), not summed in double and rounded once.
 */

const R = 4;

function moduleWith(variables: VariableInfo[], program: ProgramNode): Module {
  return { name: 'sums', graphs: new Map(), program, replicationFactor: R, variables: new Map(variables.map((v) => [v.name, v])) };
}

function variable(name: string, dtype: DType, n: number, group?: VariableInfo['group']): VariableInfo {
  return { name, type: { dtype, shape: [n] }, role: 'weight', init: Tensor.zeros(dtype, [n]), ...(group ? { group } : {}) };
}

/** Replica r's copy: column e of `rows[r]`. */
function writeReplicas(it: ModuleInterpreter, name: string, dtype: DType, rows: number[][]): void {
  rows.forEach((row, r) => it.write(name, Tensor.from(dtype, [row.length], row), [r]));
}

// element 0: 1 + 2^-24 rounds back to 1 in float32 each time (double: 1 + 3·2^-24 → 1 + 2^-22);
// element 1: 1e8 + 1 is 1e8 in float32, so the sum is 1 (double: 2)
const TINY = 2 ** -24;
const ROWS = [
  [1, 1e8, 0.1],
  [TINY, 1, 0.1],
  [TINY, -1e8, 0.1],
  [TINY, 1, 0.1],
];

/** The float32 sum of column e over the given replicas, partial sum by partial sum. */
function floatSum(replicas: number[], e: number): number {
  let a = Math.fround(ROWS[replicas[0]!]![e]!);
  for (const r of replicas.slice(1)) a = Math.fround(a + Math.fround(ROWS[r]![e]!));
  return a;
}

describe('replicated all_reduce in the reference', () => {
  it('sums float32 in float32, in replica order', () => {
    const it_ = new ModuleInterpreter(moduleWith([variable('w', 'float32', 3)], allReduce(['w'], 'sum')));
    writeReplicas(it_, 'w', 'float32', ROWS);
    it_.run({});
    const want = [0, 1, 2].map((e) => floatSum([0, 1, 2, 3], e));
    expect(want.slice(0, 2)).toEqual([1, 1]);
    // a double sum rounded once differs
    expect(Math.fround(1 + 3 * TINY)).not.toBe(want[0]);
    expect(Math.fround(1e8 + 1 - 1e8 + 1)).not.toBe(want[1]);
    for (const t of it_.read('w')) expect(Array.from(t.data)).toEqual(want);
  });

  it('means divide the float32 sum, rounded once more', () => {
    const it_ = new ModuleInterpreter(moduleWith([variable('w', 'float32', 3)], allReduce(['w'], 'mean')));
    writeReplicas(it_, 'w', 'float32', ROWS);
    it_.run({});
    const want = [0, 1, 2].map((e) => Math.fround(floatSum([0, 1, 2, 3], e) / 4));
    for (const t of it_.read('w')) expect(Array.from(t.data)).toEqual(want);
  });

  it('sums within each replica group (orthogonal: {0, 2} and {1, 3})', () => {
    const it_ = new ModuleInterpreter(moduleWith([variable('w', 'float32', 3, { type: 'orthogonal', size: 2 })], allReduce(['w'], 'sum')));
    writeReplicas(it_, 'w', 'float32', ROWS);
    it_.run({});
    it_.read('w').forEach((t, r) => expect(Array.from(t.data)).toEqual([0, 1, 2].map((e) => floatSum(r % 2 === 0 ? [0, 2] : [1, 3], e))));
  });

  it('sums float16 in float16', () => {
    const h = 2 ** -11;
    const it_ = new ModuleInterpreter(moduleWith([variable('h', 'float16', 1)], allReduce(['h'], 'sum')));
    writeReplicas(it_, 'h', 'float16', [[1], [h], [h], [h]]);
    it_.run({});
    // 1 + 2^-11 is a tie that rounds to 1, each time; in double, 1 + 3·2^-11 rounds to 1 + 2^-9
    expect(roundToHalf(1 + 3 * h)).toBe(1 + 2 ** -9);
    for (const t of it_.read('h')) expect(Array.from(t.data)).toEqual([1]);
  });

  it('groupSum wraps 32-bit integers', () => {
    const a = Tensor.from('int32', [1], [2 ** 31 - 1]);
    const b = Tensor.from('int32', [1], [1]);
    expect(Array.from(groupSum([a, b], 'int32', false))).toEqual([-(2 ** 31)]);
  });
});
