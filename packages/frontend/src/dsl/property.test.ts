import fc from 'fast-check';
import { Tensor, parseGraph, printGraph, verifyGraph } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { compileModelSource } from './index.js';

/**
 * Random well-typed programs over the inputs x, z: f32[2,3] and y: f32[3]. Each expression is
 * printed with the fewest parentheses the precedence rules allow, and is also evaluated here
 * independently (float32 rounding after each step, as the reference kernels store), so the
 * property checks parsing (precedence, associativity), elaboration (broadcasting, literals,
 * functions, slicing) and the text IR round trip.
 */

type Node =
  | { k: 'var'; name: string }
  | { k: 'y' }
  | { k: 'num'; v: number }
  | { k: 'bin'; op: '+' | '-' | '*'; l: Node; r: Node }
  | { k: 'neg'; e: Node }
  | { k: 'pow2'; e: Node }
  | { k: 'call'; fn: 'relu' | 'tanh' | 'abs'; e: Node }
  | { k: 'div'; l: Node; r: Node }
  | { k: 'f'; a: Node; b: Node }
  | { k: 'flip'; e: Node }
  | { k: 'rot'; e: Node };

/** Precedence: + - 1, * / 2, unary - 3, ** 4, calls/names/indexing 5. */
function prec(n: Node): number {
  switch (n.k) {
    case 'bin':
      return n.op === '*' ? 2 : 1;
    case 'div':
      return 2;
    case 'neg':
      return 3;
    case 'pow2':
      return 4;
    default:
      return 5;
  }
}

function show(n: Node, min = 0): string {
  let s: string;
  switch (n.k) {
    case 'var':
      s = n.name;
      break;
    case 'y':
      s = 'y';
      break;
    case 'num':
      s = String(n.v);
      break;
    case 'bin': {
      const p = prec(n);
      s = `${show(n.l, p)} ${n.op} ${show(n.r, p + 1)}`;
      break;
    }
    case 'neg':
      s = `-${show(n.e, 3)}`;
      break;
    case 'pow2':
      s = `${show(n.e, 5)} ** 2`;
      break;
    case 'call':
      s = `${n.fn}(${show(n.e)})`;
      break;
    case 'div':
      s = `${show(n.l, 2)} / (abs(${show(n.r)}) + 1)`;
      break;
    case 'f':
      s = `f(${show(n.a)}, ${show(n.b)})`;
      break;
    case 'flip':
      s = `${show(n.e, 5)}[::-1, :]`;
      break;
    case 'rot':
      s = `rot(${show(n.e)})`;
      break;
  }
  return prec(n) < min ? `(${s})` : s;
}

type Env = Record<string, (i: number, j: number) => number>;
const r32 = Math.fround;

/** The value at (i, j) of the [2,3] result. */
function evalAt(n: Node, env: Env, i: number, j: number): number {
  const ev = (m: Node, a = i, b = j) => evalAt(m, env, a, b);
  switch (n.k) {
    case 'var':
      return env[n.name]!(i, j);
    case 'y':
      return env['y']!(i, j);
    case 'num':
      return r32(n.v);
    case 'bin': {
      const a = ev(n.l);
      const b = ev(n.r);
      return r32(n.op === '+' ? a + b : n.op === '-' ? a - b : a * b);
    }
    case 'neg':
      return -ev(n.e);
    case 'pow2':
      return r32(Math.pow(ev(n.e), 2));
    case 'call': {
      const v = ev(n.e);
      return n.fn === 'relu' ? (v > 0 ? v : 0) : n.fn === 'tanh' ? r32(Math.tanh(v)) : Math.abs(v);
    }
    case 'div':
      return r32(ev(n.l) / r32(Math.abs(ev(n.r)) + 1));
    case 'f': {
      // f(a, b) = a * b - a
      const a = ev(n.a);
      return r32(r32(a * ev(n.b)) - a);
    }
    case 'flip':
      return ev(n.e, 1 - i, j);
    case 'rot':
      return ev(n.e, i, (j + 1) % 3);
  }
}

/** Expressions over the given [2,3] variables; `y` ([3]) only as a right operand, so results stay [2,3]. */
function exprArb(vars: string[]): fc.Arbitrary<Node> {
  const { e } = fc.letrec<{ e: Node; leaf: Node; right: Node }>((tie) => ({
    leaf: fc.constantFrom<string>(...vars).map((name): Node => ({ k: 'var', name })),
    right: fc.oneof(
      { weight: 3, arbitrary: tie('e') },
      { weight: 1, arbitrary: fc.constant<Node>({ k: 'y' }) },
      { weight: 1, arbitrary: fc.constantFrom(0.5, 2, 3).map((v): Node => ({ k: 'num', v })) },
    ),
    e: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      { weight: 4, arbitrary: tie('leaf') },
      { weight: 3, arbitrary: fc.record({ k: fc.constant('bin' as const), op: fc.constantFrom('+' as const, '-' as const, '*' as const), l: tie('e'), r: tie('right') }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('neg' as const), e: tie('e') }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('pow2' as const), e: tie('e') }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('call' as const), fn: fc.constantFrom('relu' as const, 'tanh' as const, 'abs' as const), e: tie('e') }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('div' as const), l: tie('e'), r: tie('right') }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('f' as const), a: tie('e'), b: tie('right') }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('flip' as const), e: tie('e') }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('rot' as const), e: tie('e') }) },
    ),
  }));
  return e as fc.Arbitrary<Node>;
}

/** A program: some `let` bindings, each over the inputs and the earlier bindings, then the output. */
const programArb: fc.Arbitrary<Node[]> = fc.integer({ min: 0, max: 3 }).chain((lets) => {
  const arbs: fc.Arbitrary<Node>[] = [];
  for (let k = 0; k <= lets; k++) arbs.push(exprArb(['x', 'z', ...Array.from({ length: k }, (_, i) => `v${i}`)]));
  return fc.tuple(...arbs);
});

function source(exprs: Node[]): string {
  const lines = [
    'fn f(a, b) {',
    '  return a * b - a',
    '}',
    '',
    '# rotate the columns left by one',
    'fn rot(t) {',
    '  return concat([t[:, 1:], t[:, :1]], axis=1)',
    '}',
    '',
    'model p {',
    '  input x: f32[2, 3]',
    '  input y: f32[3]',
    '  input z: f32[2, 3]',
  ];
  exprs.slice(0, -1).forEach((e, i) => lines.push(`  let v${i} = ${show(e)}`));
  lines.push(`  output out = ${show(exprs[exprs.length - 1]!)}`, '}', '');
  return lines.join('\n');
}

const X = [0.5, -1.25, 2, -0.75, 1.5, -2];
const Y = [1, -0.5, 0.25];
const Z = [-1, 0.75, 0.5, 1.25, -1.5, 0.25];

describe('random well-typed programs', () => {
  test('parse, elaborate, compute what an independent evaluation computes, and round-trip the IR', () => {
    fc.assert(
      fc.property(programArb, (exprs) => {
        const src = source(exprs);
        const g = compileModelSource(src, 'p.tg');
        expect(verifyGraph(g)).toEqual([]);

        const env: Env = {
          x: (i, j) => r32(X[i * 3 + j]!),
          z: (i, j) => r32(Z[i * 3 + j]!),
          y: (_i, j) => r32(Y[j]!),
        };
        exprs.slice(0, -1).forEach((e, k) => {
          const vals = [0, 1].map((i) => [0, 1, 2].map((j) => evalAt(e, env, i, j)));
          env[`v${k}`] = (i, j) => vals[i]![j]!;
        });
        const want: number[] = [];
        for (let i = 0; i < 2; i++) for (let j = 0; j < 3; j++) want.push(evalAt(exprs[exprs.length - 1]!, env, i, j));

        const out = runGraph(g, {
          x: Tensor.from('float32', [2, 3], X),
          y: Tensor.from('float32', [3], Y),
          z: Tensor.from('float32', [2, 3], Z),
        }).outputs['out']!;
        expect(out.shape).toEqual([2, 3]);
        out.toArray().forEach((v, k) => {
          const w = want[k]!;
          if (!(Math.abs(v - w) <= 1e-5 * (1 + Math.abs(w)) || (Number.isNaN(v) && Number.isNaN(w)))) {
            throw new Error(`element ${k}: ${v} != ${w}\n${src}`);
          }
        });

        const printed = printGraph(g, { debugInfo: true });
        expect(printGraph(parseGraph(printed, 'p.ir'), { debugInfo: true })).toBe(printed);
      }),
      { numRuns: 80 },
    );
  });

  test('the printer used by the generator needs no parentheses it leaves out', () => {
    // hand-checked shapes of the printed text
    const a: Node = { k: 'var', name: 'x' };
    const b: Node = { k: 'var', name: 'z' };
    expect(show({ k: 'bin', op: '-', l: a, r: { k: 'bin', op: '-', l: b, r: a } })).toBe('x - (z - x)');
    expect(show({ k: 'bin', op: '*', l: { k: 'bin', op: '+', l: a, r: b }, r: a })).toBe('(x + z) * x');
    expect(show({ k: 'neg', e: { k: 'pow2', e: a } })).toBe('-x ** 2');
    expect(show({ k: 'pow2', e: { k: 'neg', e: a } })).toBe('(-x) ** 2');
    expect(show({ k: 'pow2', e: { k: 'div', l: a, r: b } })).toBe('(x / (abs(z) + 1)) ** 2');
  });
});
