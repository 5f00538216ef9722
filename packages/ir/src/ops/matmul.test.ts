import fc from 'fast-check';
import { DiagnosticError, GraphBuilder, Tensor, numElements, stridesOf } from '../index.js';
import { f32, runOp, runOp1 } from '../testing/kernels.js';

const matmul = (a: Tensor, b: Tensor) => runOp1('matmul', [a, b]);

describe('matmul', () => {
  it('multiplies 2-D matrices', () => {
    // [[1,2],[3,4]] @ [[5,6],[7,8]] = [[1*5+2*7, 1*6+2*8], [3*5+4*7, 3*6+4*8]] = [[19,22],[43,50]]
    const y = matmul(f32([2, 2], [1, 2, 3, 4]), f32([2, 2], [5, 6, 7, 8]));
    expect(y.shape).toEqual([2, 2]);
    expect(y.toArray()).toEqual([19, 22, 43, 50]);
    // [1,3] @ [3,2]: [1,2,3]·[1,0,2] = 7, [1,2,3]·[0,1,1] = 5
    expect(matmul(f32([1, 3], [1, 2, 3]), f32([3, 2], [1, 0, 0, 1, 2, 1])).toArray()).toEqual([7, 5]);
  });

  it('promotes 1-D operands and removes the added dimension', () => {
    // dot product: 1*4 + 2*5 + 3*6 = 32, a scalar
    const dot = matmul(f32([3], [1, 2, 3]), f32([3], [4, 5, 6]));
    expect(dot.shape).toEqual([]);
    expect(dot.toArray()).toEqual([32]);
    // row vector [1,2] @ [[1,2,3],[4,5,6]] = [1+8, 2+10, 3+12] = [9,12,15]
    const vm = matmul(f32([2], [1, 2]), f32([2, 3], [1, 2, 3, 4, 5, 6]));
    expect(vm.shape).toEqual([3]);
    expect(vm.toArray()).toEqual([9, 12, 15]);
    // [[1,2],[3,4]] @ column [1,1] = [3,7]
    const mv = matmul(f32([2, 2], [1, 2, 3, 4]), f32([2], [1, 1]));
    expect(mv.shape).toEqual([2]);
    expect(mv.toArray()).toEqual([3, 7]);
  });

  it('broadcasts batch dimensions', () => {
    // a[2,1,2,2] = [I, 2I]; b[3,2,2] = [B0, B1, B2] → y[i][j] = a[i] @ b[j]
    const a = f32([2, 1, 2, 2], [1, 0, 0, 1, 2, 0, 0, 2]);
    const bv = [1, 2, 3, 4, 0, 1, 1, 0, 5, 5, 5, 5];
    const y = matmul(a, f32([3, 2, 2], bv));
    expect(y.shape).toEqual([2, 3, 2, 2]);
    // I @ Bj = Bj; 2I @ Bj = 2Bj
    expect(y.toArray()).toEqual([...bv, ...bv.map((v) => 2 * v)]);
    // 1-D left operand against a batch: [1,1] @ b[j] sums the rows of each b[j]
    const r = matmul(f32([2], [1, 1]), f32([3, 2, 2], bv));
    expect(r.shape).toEqual([3, 2]);
    expect(r.toArray()).toEqual([4, 6, 1, 1, 10, 10]);
    // batch @ 1-D right operand: each b[j] @ [1,0] picks column 0
    const c = matmul(f32([3, 2, 2], bv), f32([2], [1, 0]));
    expect(c.shape).toEqual([3, 2]);
    expect(c.toArray()).toEqual([1, 3, 0, 1, 5, 5]);
  });

  it('agrees with a direct formula on random broadcast shapes, and inference agrees with the kernel', () => {
    const dim = fc.integer({ min: 1, max: 3 });
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(1, 2, 3), { maxLength: 3 }),
        fc.array(fc.constantFrom(1, 2, 3), { maxLength: 3 }),
        dim,
        dim,
        dim,
        fc.boolean(),
        fc.boolean(),
        (ba0, bb0, m, k, n, aVec, bVec) => {
          // make the batch shapes broadcastable: where both have a dim, one of them becomes 1 or they agree
          const rank = Math.max(ba0.length, bb0.length);
          const ba = [...ba0];
          const bb = [...bb0];
          for (let i = 1; i <= rank; i++) {
            const ia = ba.length - i;
            const ib = bb.length - i;
            if (ia >= 0 && ib >= 0 && ba[ia] !== bb[ib] && ba[ia] !== 1 && bb[ib] !== 1) bb[ib] = 1;
          }
          const aShape = aVec ? [k] : [...ba, m, k];
          const bShape = bVec ? [k] : [...bb, k, n];
          const av = Array.from({ length: numElements(aShape) }, (_, i) => ((i * 7) % 5) - 2);
          const bvals = Array.from({ length: numElements(bShape) }, (_, i) => ((i * 3) % 7) - 3);
          const y = matmul(f32(aShape, av), f32(bShape, bvals));
          // independent reference: index each output element and sum over k
          const A = aVec ? [1, k] : aShape;
          const B = bVec ? [k, 1] : bShape;
          const batchA = A.slice(0, -2);
          const batchB = B.slice(0, -2);
          const br = Math.max(batchA.length, batchB.length);
          const batch = Array.from({ length: br }, (_, i) => {
            const x = batchA[i - (br - batchA.length)] ?? 1;
            const z = batchB[i - (br - batchB.length)] ?? 1;
            return Math.max(x, z);
          });
          const expected: number[] = [];
          const sa = stridesOf(A);
          const sb = stridesOf(B);
          for (let bi = 0; bi < numElements(batch); bi++) {
            const idx = batch.map((_, d) => Math.floor(bi / numElements(batch.slice(d + 1))) % batch[d]!);
            const offA = idx.slice(br - batchA.length).reduce((s, v, d) => s + (batchA[d] === 1 ? 0 : v) * sa[d]!, 0);
            const offB = idx.slice(br - batchB.length).reduce((s, v, d) => s + (batchB[d] === 1 ? 0 : v) * sb[d]!, 0);
            const M = A[A.length - 2]!;
            const N = B[B.length - 1]!;
            for (let i = 0; i < M; i++) {
              for (let j = 0; j < N; j++) {
                let s = 0;
                for (let p = 0; p < k; p++) s += av[offA + i * k + p]! * bvals[offB + p * N + j]!;
                expected.push(s);
              }
            }
          }
          expect(y.toArray()).toEqual(expected);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('accumulates float16 products in float64 and rounds once', () => {
    // 1 + 2^-11 + 2^-11 = 1 + 2^-10, a float16 value; summing in float16 would round
    // 1 + 2^-11 to 1 (tie to even) twice and give 1
    const h = 2 ** -11;
    const y = runOp('matmul', [Tensor.from('float16', [3], [1, h, h]), Tensor.from('float16', [3], [1, 1, 1])])[0]!;
    expect(y.dtype).toBe('float16');
    expect(y.toArray()).toEqual([1 + 2 ** -10]);
    // 0.1 is stored as 0.0999755859375 in float16; 3 * that = 0.2999267578125 = 1228.5 * 2^-12
    // (the float16 spacing in [0.25, 0.5)), a tie that rounds to even: 1228 * 2^-12 = 0.2998046875
    const z = runOp('matmul', [Tensor.from('float16', [1], [3]), Tensor.from('float16', [1], [0.1])])[0]!;
    expect(z.toArray()).toEqual([0.2998046875]);
  });

  it('accumulates float32 products in float64 and rounds once', () => {
    // 1 + 2^-24 + 2^-24 = 1 + 2^-23, the float32 after 1; a float32 running sum would round
    // 1 + 2^-24 (half an ulp) to 1 at each step
    const e = 2 ** -24;
    expect(matmul(f32([1, 3], [1, e, e]), f32([3, 1], [1, 1, 1])).toArray()).toEqual([1 + 2 ** -23]);
  });

  it('wraps int32 products modulo 2^32', () => {
    // 3*5 + 4*6 = 39
    expect(runOp('matmul', [Tensor.from('int32', [2], [3, 4]), Tensor.from('int32', [2], [5, 6])])[0]!.toArray()).toEqual([39]);
    // 65536 * 65536 = 2^32 → 0, plus 1*1
    expect(runOp('matmul', [Tensor.from('int32', [2], [65536, 1]), Tensor.from('int32', [2], [65536, 1])])[0]!.toArray()).toEqual([1]);
  });

  describe('errors', () => {
    function build(a: number[], b: number[], bt: 'float32' | 'float16' = 'float32') {
      const g = new GraphBuilder();
      return () => g.op('matmul', [g.input('a', 'float32', a), g.input('b', bt, b)]);
    }
    it('names the shapes when inner dimensions differ', () => {
      expect(build([4, 784], [128, 10])).toThrow(DiagnosticError);
      expect(build([4, 784], [128, 10])).toThrow('matmul: inner dimensions differ, [4,784] @ [128,10]');
      expect(build([3], [4])).toThrow('matmul: inner dimensions differ, [3] @ [4]');
    });
    it('rejects unbroadcastable batches, scalars and mixed dtypes', () => {
      expect(build([2, 3, 4], [5, 4, 6])).toThrow('matmul: batch dimensions [2] and [5] are not broadcastable, [2,3,4] @ [5,4,6]');
      expect(build([], [3])).toThrow('matmul: operands must have rank 1 or more, got [] @ [3]');
      expect(build([2, 2], [2, 2], 'float16')).toThrow('matmul: operand types differ: f32 and f16');
    });
  });
});
