import type * as A from './ast.js';
import { exprText } from './elaborate.js';
import { DslError, grammarProblems, parseFile, parseModelSource } from './index.js';

/** Parses `src` as the body of a model and returns its statements. */
function stmts(src: string): readonly A.Stmt[] {
  const r = parseFile(`model m {\n${src}\n}\n`, 't.tg');
  if (!r.ast) throw new Error(JSON.stringify(r.problems));
  return (r.ast.items[0] as A.ModelDecl).body;
}

/** Fully parenthesised text of an expression statement, to check precedence. */
function paren(e: A.Expr): string {
  switch (e.kind) {
    case 'binary':
      return `(${paren(e.left)} ${e.op} ${paren(e.right)})`;
    case 'unary':
      return `(${e.op}${paren(e.operand)})`;
    default:
      return exprText(e);
  }
}

function exprOf(src: string): A.Expr {
  const [s] = stmts(src);
  if (s?.kind !== 'expr') throw new Error(`not an expression statement: ${src}`);
  return s.expr;
}

function problems(src: string): string[] {
  return parseFile(src, 'p.tg').problems.map((p) => `${p.line}:${p.col} ${p.message}`);
}

describe('model language parser', () => {
  test('operator precedence and associativity', () => {
    expect(paren(exprOf('a + b * c'))).toBe('(a + (b * c))');
    expect(paren(exprOf('a - b - c'))).toBe('((a - b) - c)');
    expect(paren(exprOf('-x ** 2'))).toBe('(-(x ** 2))');
    expect(paren(exprOf('a ** b ** c'))).toBe('(a ** (b ** c))');
    expect(paren(exprOf('x @ w + b'))).toBe('((x @ w) + b)');
    expect(paren(exprOf('a < b && c == d || !e'))).toBe('(((a < b) && (c == d)) || (!e))');
    expect(paren(exprOf('a // 2 % 3'))).toBe('((a // 2) % 3)');
    expect(paren(exprOf('2 ** -1'))).toBe('(2 ** (-1))');
  });

  test('calls with named arguments, `as` names, members and indexing', () => {
    const e = exprOf('linear(x, 16, out=32) as encoder.layers[i + 1].fc');
    expect(e.kind).toBe('call');
    if (e.kind !== 'call') return;
    expect(e.args.map((a) => a.name ?? '-')).toEqual(['-', '-', 'out']);
    expect(e.as?.segments.map((s) => ('name' in s ? s.name : `[${exprText(s.index)}]`))).toEqual(['encoder', 'layers', '[i + 1]', 'fc']);
    expect(e.pos).toEqual({ line: 2, col: 1, length: 6 });

    const m = exprOf('ns.f(x).shape[0]');
    expect(m.kind).toBe('index');
    if (m.kind !== 'index') return;
    expect(m.target.kind).toBe('member');
    const call = (m.target as { target: A.Expr }).target;
    expect(call.kind).toBe('call');
    // the call's position is the called name
    expect((call as { pos: A.Pos }).pos).toEqual({ line: 2, col: 4, length: 1 });
  });

  test('subscripts: index, slices with every part optional, ellipsis', () => {
    const e = exprOf('x[0, :, 1:, :3, ::2, 1:-1:-1, ...]');
    if (e.kind !== 'index') throw new Error('not an index');
    const desc = e.subscripts.map((s) => {
      if (s.kind === 'ellipsis') return '...';
      if (s.kind === 'at') return exprText(s.index);
      return [s.start, s.stop, s.step].map((p) => (p ? exprText(p) : '')).join(':');
    });
    expect(desc).toEqual(['0', '::', '1::', ':3:', '::2', '1:-1:-1', '...']);
  });

  test('tuples, lists, trailing commas and parenthesised expressions', () => {
    expect(exprOf('(a)').kind).toBe('name');
    expect(exprOf('(a,)').kind).toBe('tuple');
    expect(exprOf('()').kind).toBe('tuple');
    const l = exprOf('[1, 2,\n 3,\n]');
    expect(l.kind === 'list' && l.items.length).toBe(3);
    const [s] = stmts('let (a, (b, _)) = f(x)');
    expect(s?.kind === 'let' && s.pattern).toMatchObject({ kind: 'tuple', items: [{ kind: 'bind', name: 'a' }, { kind: 'tuple', items: [{ kind: 'bind', name: 'b' }, { kind: 'ignore' }] }] });
  });

  test('statements and contextual keywords', () => {
    const ss = stmts(
      [
        'input x: f32[4, 16]',
        'param w: f32[32, 16] = normal(std=0.02, seed=1)',
        'const c: f32[2] = [1, 2]; const k = 3',
        'output logits = x',
        'output x',
        'loss = x',
        'block "b" ipu 1 stage 2 {',
        '  let input = x   # a contextual keyword used as a name',
        '}',
        'block ipu 0 { }',
        'scope "enc" { }',
        'if a { } else if b { } else { }',
        'for i in range(3) { let in = i }',
        'ipu_print_tensor(x, "x")',
      ].join('\n'),
    );
    expect(ss.map((s) => s.kind)).toEqual(['input', 'param', 'const', 'const', 'output', 'output', 'loss', 'block', 'block', 'scope', 'if', 'for', 'expr']);
    const blk = ss[7] as Extract<A.Stmt, { kind: 'block' }>;
    expect(blk.name).toBe('b');
    expect(exprText(blk.ipu!)).toBe('1');
    expect(exprText(blk.stage!)).toBe('2');
    expect(blk.phase).toBeUndefined();
    expect((blk.body[0] as Extract<A.Stmt, { kind: 'let' }>).pattern).toMatchObject({ name: 'input' });
    const noName = ss[8] as Extract<A.Stmt, { kind: 'block' }>;
    expect(noName.name).toBeUndefined();
    const iff = ss[10] as Extract<A.Stmt, { kind: 'if' }>;
    expect(iff.else?.[0]?.kind).toBe('if');
  });

  test('functions, types with wildcards, imports and model parameters', () => {
    const f = parseModelSource(
      'import "std/nn.tg" as nn\nconst D = 4\nfn f(x: f32[_, ..., in], in: int, act = relu,\n      out: int = 2 * D) {\n  return x, in\n}\nmodel m(batch: int = 4) { }\n',
      'f.tg',
    );
    expect(f.items.map((i) => i.kind)).toEqual(['import', 'const', 'fn', 'model']);
    expect(f.items[0]).toMatchObject({ path: 'std/nn.tg', alias: 'nn' });
    const fn = f.items[2] as A.FnDecl;
    expect(fn.params.map((p) => p.name)).toEqual(['x', 'in', 'act', 'out']);
    expect(fn.params[0]!.type!.dims!.map((d) => d.kind)).toEqual(['any', 'rest', 'expr']);
    expect((fn.body[0] as Extract<A.Stmt, { kind: 'return' }>).values.length).toBe(2);
    expect((f.items[3] as A.ModelDecl).params[0]!.name).toBe('batch');
  });

  test('line layout: continuation after operators and inside brackets, not after =', () => {
    expect(paren(exprOf('a +\n  b'))).toBe('(a + b)');
    expect(exprText(exprOf('f(a,\n  b)'))).toBe('f(a, b)');
    expect(problems('model m {\n  let x =\n    y\n}\n')).toEqual(["2:10 expected an expression but found the end of the line"]);
    // two statements on one line without ';' are an error
    expect(problems('model m {\n  let a = b c\n}\n')).toEqual(["2:13 expected end of statement but found 'c'"]);
  });

  test('every syntax error of a file is reported, once each', () => {
    const src = [
      'model m {', //                       1
      '  let x = (1 +', //                  2: unclosed '('
      '  input z f32[3]', //                3: missing ':'
      '  let w = a $ b', //                 4: bad character (the rest of the line is not re-reported)
      '  let s = "abc', //                  5: unclosed string
      '  output = 3', //                    6: output without a name
      '}',
      'fn f( {', //                         8: parameter list not closed
      '}',
      'oops', //                            10: not a top-level item
      'fn g() {',
      '  return 1 +', //                    12: parsing went on after line 10
      '}',
    ].join('\n');
    expect(problems(src)).toEqual([
      '2:15 expected an expression but found the end of the line',
      "3:11 expected ':' but found 'f32'",
      "4:13 unexpected character '$'",
      '5:11 string is not closed (add \'"\' before the end of the line)',
      "6:10 expected end of statement but found '='",
      "8:7 expected ')' but found '{'",
      "10:1 expected 'import', 'const', 'fn' or 'model' but found 'oops'",
      '13:1 expected an expression but found the end of the statement',
    ]);
  });

  test('parseModelSource throws a DslError rendering every problem with its line and caret', () => {
    try {
      parseModelSource('model m {\n  let = 3\n  let y = )\n}\n', 'e.tg');
      throw new Error('no error');
    } catch (e) {
      expect(e).toBeInstanceOf(DslError);
      expect((e as DslError).message).toBe(
        [
          "e.tg:2:7: error: expected a name, '_' or '(' in a 'let' but found '='",
          '    let = 3',
          '        ^',
          "e.tg:3:11: error: expected an expression but found ')'",
          '    let y = )',
          '            ^',
        ].join('\n'),
      );
      expect((e as DslError).diagnostics.length).toBe(2);
    }
  });
});

describe('grammar', () => {
  // loads skip chevrotain's validations of the tokens and the grammar (their cost is most of a
  // parser's construction); here they run
  test('the token definitions and the grammar pass chevrotain\'s validations', () => {
    expect(grammarProblems()).toEqual([]);
  });
});
