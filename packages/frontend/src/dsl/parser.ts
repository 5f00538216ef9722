import { CstNode, CstParser, EOF, IParserErrorMessageProvider, IRecognitionException, IToken, TokenType } from '@tilegraph/ir/chevrotain';
import type * as A from './ast.js';
import {
  ALL_TOKENS, AddOp, AndAnd, As, Assign, Bang, Block, CmpOp, Colon, Comma, Const, Dot, Ellipsis, Else, False, Fn, For,
  Ident, If, Import, In, Input, Ipu, LBracket, LCurly, LParen, Let, Loss, Minus, Model, MulOp, MultiConv, Newline, NumberLit, OrOr,
  Output, Param, Phase, RBracket, RCurly, RParen, Return, Scope, Sep, Stage, StarStar, StringLit, True, lastPosition, lex, lexerProblems,
} from './lexer.js';

function describe(t: IToken | undefined): string {
  if (!t || t.tokenType === EOF) return 'the end of the file';
  if (t.tokenType === Newline) return 'the end of the line';
  if (t.tokenType === Sep) return 'the end of the statement';
  return `'${t.image}'`;
}

/** What each rule expects, for "expected X but found Y" messages. */
const RULE_WANTS: Record<string, string> = {
  file: "'import', 'const', 'fn' or 'model'",
  topItem: "'import', 'const', 'fn' or 'model'",
  statement: 'a statement',
  primary: 'an expression',
  unaryExpr: 'an expression',
  subscript: 'an index or a slice',
  pattern: "a name, '_' or '(' in a 'let'",
  asSegment: 'a name or a number after \'as\'',
  ifStmt: "'{' or 'if' after 'else'",
  dim: 'a dimension',
};

const TOP_START = new Set<TokenType>([Import, Const, Fn, Model]);
function isSepToken(t: IToken | undefined): boolean {
  return t === undefined || t.tokenType === Sep || t.tokenType === Newline || t.tokenType.name === 'Semicolon';
}

const messages: IParserErrorMessageProvider = {
  buildMismatchTokenMessage: ({ expected, actual }) =>
    `expected ${expected === EOF ? RULE_WANTS['file'] : expected.LABEL ?? expected.name} but found ${describe(actual)}`,
  buildNotAllInputParsedMessage: ({ firstRedundant }) => `expected ${RULE_WANTS['file']} but found ${describe(firstRedundant)}`,
  buildNoViableAltMessage: ({ actual, ruleName }) => `expected ${RULE_WANTS[ruleName] ?? 'something else'} but found ${describe(actual[0])}`,
  buildEarlyExitMessage: ({ actual, ruleName }) => `expected ${RULE_WANTS[ruleName] ?? 'something else'} but found ${describe(actual[0])}`,
};

/**
 * The most levels a model file may nest: brackets, calls, indexing, blocks, prefix operators, `**`,
 * `else if` and member/call/index suffixes each open one. Parsing, the syntax tree and elaboration
 * recurse once per level, and each level of parentheses takes about 6 KB of the stack in the
 * parser: 100 levels stay well inside Node's default stack wherever the parser is called from.
 */
export const MAX_NESTING = 100;

/** Thrown out of the parser (chevrotain passes on errors that are not its own) at the level past MAX_NESTING. */
class TooDeep extends Error {
  constructor(readonly token: IToken) {
    super('nesting too deep');
  }
}

class TgParser extends CstParser {
  /** Levels open at the current token. */
  depth = 0;

  /**
   * `validate`: run chevrotain's checks of the grammar (ambiguities, left recursion, empty
   * alternatives), most of the parser's construction time. The grammar is fixed, so every load of
   * a model skips them, and its test runs them (grammarProblems).
   */
  constructor(validate = false) {
    super(ALL_TOKENS, { recoveryEnabled: true, errorMessageProvider: messages, maxLookahead: 3, skipValidations: !validate });
    this.performSelfAnalysis();
  }

  /** Runs `f` one level deeper; `at` is the token that opened the level. */
  private nested<T>(at: IToken, f: () => T): T {
    if (++this.depth > MAX_NESTING && !this.RECORDING_PHASE) {
      this.depth--;
      throw new TooDeep(at);
    }
    try {
      return f();
    } finally {
      this.depth--;
    }
  }

  file = this.RULE('file', () => {
    this.MANY(() => {
      this.OR([{ ALT: () => this.CONSUME(Sep) }, { ALT: () => this.SUBRULE(this.topLine) }]);
    });
  });

  /** A top-level item and its end: a failure inside resynchronises at the end of the line. */
  topLine = this.RULE('topLine', () => {
    this.SUBRULE(this.topItem);
    this.CONSUME(Sep);
  });

  topItem = this.RULE('topItem', () => {
    this.OR([
      { ALT: () => this.SUBRULE(this.importDecl) },
      { ALT: () => this.SUBRULE(this.constDecl) },
      { ALT: () => this.SUBRULE(this.fnDecl) },
      { ALT: () => this.SUBRULE(this.modelDecl) },
    ]);
  });

  importDecl = this.RULE('importDecl', () => {
    this.CONSUME(Import);
    this.CONSUME(StringLit);
    this.OPTION(() => {
      this.CONSUME(As);
      this.CONSUME(Ident);
    });
  });

  constDecl = this.RULE('constDecl', () => {
    this.CONSUME(Const);
    this.CONSUME(Ident);
    this.OPTION(() => {
      this.CONSUME(Colon);
      this.SUBRULE(this.typeExpr);
    });
    this.CONSUME(Assign);
    this.SUBRULE(this.expr);
  });

  fnDecl = this.RULE('fnDecl', () => {
    this.CONSUME(Fn);
    this.CONSUME(Ident);
    this.CONSUME(LParen);
    this.OPTION(() => this.SUBRULE(this.paramList));
    this.CONSUME(RParen);
    this.SUBRULE(this.body);
  });

  modelDecl = this.RULE('modelDecl', () => {
    this.CONSUME(Model);
    this.CONSUME(Ident);
    this.OPTION(() => {
      this.CONSUME(LParen);
      this.OPTION2(() => this.SUBRULE(this.paramList));
      this.CONSUME(RParen);
    });
    this.SUBRULE(this.body);
  });

  paramList = this.RULE('paramList', () => {
    this.SUBRULE(this.fnParam);
    this.MANY({
      GATE: () => this.LA(2).tokenType !== RParen,
      DEF: () => {
        this.CONSUME(Comma);
        this.SUBRULE2(this.fnParam);
      },
    });
    this.OPTION(() => this.CONSUME2(Comma));
  });

  fnParam = this.RULE('fnParam', () => {
    this.CONSUME(Ident);
    this.OPTION(() => {
      this.CONSUME(Colon);
      this.SUBRULE(this.typeExpr);
    });
    this.OPTION2(() => {
      this.CONSUME(Assign);
      this.SUBRULE(this.expr);
    });
  });

  typeExpr = this.RULE('typeExpr', () => {
    this.CONSUME(Ident);
    this.OPTION(() => {
      this.CONSUME(LBracket);
      this.OPTION2(() => {
        this.SUBRULE(this.dim);
        this.MANY(() => {
          this.CONSUME(Comma);
          this.SUBRULE2(this.dim);
        });
      });
      this.CONSUME(RBracket);
    });
  });

  dim = this.RULE('dim', () => {
    this.OR([{ ALT: () => this.CONSUME(Ellipsis) }, { ALT: () => this.SUBRULE(this.expr) }]);
  });

  body = this.RULE('body', () => {
    const open = this.CONSUME(LCurly);
    this.nested(open, () =>
      this.MANY(() => {
        this.OR([{ ALT: () => this.CONSUME(Sep) }, { ALT: () => this.SUBRULE(this.stmtLine) }]);
      }),
    );
    this.CONSUME(RCurly);
  });

  /** A statement and its end: a failure inside resynchronises there instead of ending the body. */
  stmtLine = this.RULE('stmtLine', () => {
    this.SUBRULE(this.statement);
    this.CONSUME(Sep);
  });

  statement = this.RULE('statement', () => {
    this.OR([
      { ALT: () => this.SUBRULE(this.letStmt) },
      { ALT: () => this.SUBRULE(this.inputStmt) },
      { ALT: () => this.SUBRULE(this.paramStmt) },
      { ALT: () => this.SUBRULE(this.constDecl) },
      { ALT: () => this.SUBRULE(this.outputStmt) },
      { ALT: () => this.SUBRULE(this.lossStmt) },
      { ALT: () => this.SUBRULE(this.returnStmt) },
      { ALT: () => this.SUBRULE(this.blockStmt) },
      { ALT: () => this.SUBRULE(this.scopeStmt) },
      { ALT: () => this.SUBRULE(this.multiConvStmt) },
      { ALT: () => this.SUBRULE(this.ifStmt) },
      { ALT: () => this.SUBRULE(this.forStmt) },
      { ALT: () => this.SUBRULE(this.expr) },
    ]);
  });

  letStmt = this.RULE('letStmt', () => {
    this.CONSUME(Let);
    this.SUBRULE(this.pattern);
    this.CONSUME(Assign);
    this.SUBRULE(this.expr);
  });

  pattern = this.RULE('pattern', () => {
    this.OR([
      { ALT: () => this.CONSUME(Ident) },
      {
        ALT: () => {
          const open = this.CONSUME(LParen);
          this.nested(open, () => {
            this.SUBRULE(this.pattern);
            this.MANY({
              GATE: () => this.LA(2).tokenType !== RParen,
              DEF: () => {
                this.CONSUME(Comma);
                this.SUBRULE2(this.pattern);
              },
            });
            this.OPTION(() => this.CONSUME2(Comma));
          });
          this.CONSUME(RParen);
        },
      },
    ]);
  });

  inputStmt = this.RULE('inputStmt', () => {
    this.CONSUME(Input);
    this.CONSUME(Ident);
    this.CONSUME(Colon);
    this.SUBRULE(this.typeExpr);
  });

  paramStmt = this.RULE('paramStmt', () => {
    this.CONSUME(Param);
    this.CONSUME(Ident);
    this.CONSUME(Colon);
    this.SUBRULE(this.typeExpr);
    this.CONSUME(Assign);
    this.SUBRULE(this.expr);
  });

  outputStmt = this.RULE('outputStmt', () => {
    this.CONSUME(Output);
    this.CONSUME(Ident);
    this.OPTION(() => {
      this.CONSUME(Assign);
      this.SUBRULE(this.expr);
    });
  });

  lossStmt = this.RULE('lossStmt', () => {
    this.CONSUME(Loss);
    this.CONSUME(Assign);
    this.SUBRULE(this.expr);
  });

  returnStmt = this.RULE('returnStmt', () => {
    this.CONSUME(Return);
    this.OPTION(() => {
      this.SUBRULE(this.expr);
      this.MANY(() => {
        this.CONSUME(Comma);
        this.SUBRULE2(this.expr);
      });
    });
  });

  blockStmt = this.RULE('blockStmt', () => {
    this.CONSUME(Block);
    this.OPTION(() => this.CONSUME(StringLit));
    this.OPTION2(() => {
      this.CONSUME(Ipu);
      this.SUBRULE(this.expr);
    });
    this.OPTION3(() => {
      this.CONSUME(Stage);
      this.SUBRULE2(this.expr);
    });
    this.OPTION4(() => {
      this.CONSUME(Phase);
      this.SUBRULE3(this.expr);
    });
    this.SUBRULE(this.body);
  });

  scopeStmt = this.RULE('scopeStmt', () => {
    this.CONSUME(Scope);
    this.CONSUME(StringLit);
    this.SUBRULE(this.body);
  });

  /** `multi_conv name = value, ... { body }`: PopTorch's MultiConv with its options. */
  multiConvStmt = this.RULE('multiConvStmt', () => {
    this.CONSUME(MultiConv);
    this.MANY_SEP({
      SEP: Comma,
      DEF: () => {
        this.CONSUME(Ident);
        this.CONSUME(Assign);
        this.SUBRULE(this.expr);
      },
    });
    this.SUBRULE(this.body);
  });

  ifStmt = this.RULE('ifStmt', () => {
    this.CONSUME(If);
    this.SUBRULE(this.expr);
    this.SUBRULE(this.body);
    this.OPTION(() => {
      const kw = this.CONSUME(Else);
      // an `else if` chain nests in the syntax tree like a block
      this.OR([{ ALT: () => this.nested(kw, () => this.SUBRULE(this.ifStmt)) }, { ALT: () => this.SUBRULE2(this.body) }]);
    });
  });

  forStmt = this.RULE('forStmt', () => {
    this.CONSUME(For);
    this.CONSUME(Ident);
    this.CONSUME(In);
    this.SUBRULE(this.expr);
    this.SUBRULE(this.body);
  });

  // ---- expressions, loosest binding first ----

  expr = this.RULE('expr', () => {
    this.SUBRULE(this.andExpr);
    this.MANY(() => {
      this.CONSUME(OrOr);
      this.SUBRULE2(this.andExpr);
    });
  });

  andExpr = this.RULE('andExpr', () => {
    this.SUBRULE(this.cmpExpr);
    this.MANY(() => {
      this.CONSUME(AndAnd);
      this.SUBRULE2(this.cmpExpr);
    });
  });

  cmpExpr = this.RULE('cmpExpr', () => {
    this.SUBRULE(this.addExpr);
    this.OPTION(() => {
      this.CONSUME(CmpOp);
      this.SUBRULE2(this.addExpr);
    });
  });

  addExpr = this.RULE('addExpr', () => {
    this.SUBRULE(this.mulExpr);
    this.MANY(() => {
      this.CONSUME(AddOp);
      this.SUBRULE2(this.mulExpr);
    });
  });

  mulExpr = this.RULE('mulExpr', () => {
    this.SUBRULE(this.unaryExpr);
    this.MANY(() => {
      this.CONSUME(MulOp);
      this.SUBRULE2(this.unaryExpr);
    });
  });

  unaryExpr = this.RULE('unaryExpr', () => {
    this.OR([
      {
        ALT: () => {
          const op = this.OR2([{ ALT: () => this.CONSUME(Minus) }, { ALT: () => this.CONSUME(Bang) }]);
          this.nested(op, () => this.SUBRULE(this.unaryExpr));
        },
      },
      { ALT: () => this.SUBRULE(this.powExpr) },
    ]);
  });

  powExpr = this.RULE('powExpr', () => {
    this.SUBRULE(this.postfixExpr);
    this.OPTION(() => {
      const op = this.CONSUME(StarStar);
      this.nested(op, () => this.SUBRULE(this.unaryExpr));
    });
  });

  postfixExpr = this.RULE('postfixExpr', () => {
    this.SUBRULE(this.primary);
    // each further suffix wraps the expression before it: a chain nests as deep as it is long
    const before = this.depth;
    let suffixes = 0;
    try {
      this.MANY(() => {
        const t = this.LA(1);
        if (suffixes++ > 0 && ++this.depth > MAX_NESTING && !this.RECORDING_PHASE) throw new TooDeep(t);
        this.OR([
          { ALT: () => this.SUBRULE(this.callSuffix) },
          { ALT: () => this.SUBRULE(this.indexSuffix) },
          {
            ALT: () => {
              this.CONSUME(Dot);
              this.CONSUME(Ident);
            },
          },
        ]);
      });
    } finally {
      this.depth = before;
    }
  });

  callSuffix = this.RULE('callSuffix', () => {
    const open = this.CONSUME(LParen);
    this.nested(open, () =>
      this.OPTION(() => {
        this.SUBRULE(this.arg);
        this.MANY({
          GATE: () => this.LA(2).tokenType !== RParen,
          DEF: () => {
            this.CONSUME(Comma);
            this.SUBRULE2(this.arg);
          },
        });
        this.OPTION2(() => this.CONSUME2(Comma));
      }),
    );
    this.CONSUME(RParen);
    this.OPTION3(() => {
      this.CONSUME(As);
      this.SUBRULE(this.asName);
    });
  });

  arg = this.RULE('arg', () => {
    this.OPTION(() => {
      this.CONSUME(Ident);
      this.CONSUME(Assign);
    });
    this.SUBRULE(this.expr);
  });

  asName = this.RULE('asName', () => {
    this.SUBRULE(this.asSegment);
    this.MANY(() => {
      this.CONSUME(Dot);
      this.SUBRULE2(this.asSegment);
    });
  });

  asSegment = this.RULE('asSegment', () => {
    this.OR([{ ALT: () => this.CONSUME(Ident) }, { ALT: () => this.CONSUME(NumberLit) }]);
    this.MANY(() => {
      const open = this.CONSUME(LBracket);
      this.nested(open, () => this.SUBRULE(this.expr));
      this.CONSUME(RBracket);
    });
  });

  indexSuffix = this.RULE('indexSuffix', () => {
    const open = this.CONSUME(LBracket);
    this.nested(open, () => {
      this.SUBRULE(this.subscript);
      this.MANY(() => {
        this.CONSUME(Comma);
        this.SUBRULE2(this.subscript);
      });
    });
    this.CONSUME(RBracket);
  });

  subscript = this.RULE('subscript', () => {
    this.OR([
      { ALT: () => this.CONSUME(Ellipsis) },
      {
        ALT: () => {
          this.SUBRULE(this.expr);
          this.OPTION(() => this.SUBRULE(this.sliceTail));
        },
      },
      { ALT: () => this.SUBRULE2(this.sliceTail) },
    ]);
  });

  /** `: stop? (: step?)?` */
  sliceTail = this.RULE('sliceTail', () => {
    this.CONSUME(Colon);
    this.OPTION(() => this.SUBRULE(this.expr));
    this.OPTION2(() => {
      this.CONSUME2(Colon);
      this.OPTION3(() => this.SUBRULE2(this.expr));
    });
  });

  primary = this.RULE('primary', () => {
    this.OR([
      { ALT: () => this.CONSUME(NumberLit) },
      { ALT: () => this.CONSUME(StringLit) },
      { ALT: () => this.CONSUME(True) },
      { ALT: () => this.CONSUME(False) },
      { ALT: () => this.CONSUME(Ident) },
      {
        ALT: () => {
          const open = this.CONSUME(LParen);
          this.nested(open, () => this.OPTION(() => this.SUBRULE(this.exprList)));
          this.CONSUME(RParen);
        },
      },
      {
        ALT: () => {
          const open = this.CONSUME(LBracket);
          this.nested(open, () => this.OPTION2(() => this.SUBRULE2(this.exprList)));
          this.CONSUME(RBracket);
        },
      },
    ]);
  });

  /** Comma-separated expressions, an optional trailing comma. */
  exprList = this.RULE('exprList', () => {
    this.SUBRULE(this.expr);
    this.MANY({
      GATE: () => this.LA(2).tokenType !== RParen && this.LA(2).tokenType !== RBracket,
      DEF: () => {
        this.CONSUME(Comma);
        this.SUBRULE2(this.expr);
      },
    });
    this.OPTION(() => this.CONSUME2(Comma));
  });
}

let parser: TgParser | undefined;
function getParser(): TgParser {
  parser ??= new TgParser();
  return parser;
}

/** The problems chevrotain's validations find in the lexer's tokens and the grammar (none, when both are sound). */
export function grammarProblems(): string[] {
  const problems = lexerProblems();
  try {
    new TgParser(true); // chevrotain throws on the problems it finds
  } catch (e) {
    problems.push(e instanceof Error ? e.message : String(e));
  }
  return problems;
}

/** A syntax problem: where and what. */
export interface SyntaxProblem {
  readonly message: string;
  readonly line: number;
  readonly col: number;
  readonly length: number;
}

export interface ParseResult {
  /** Present when there were no syntax problems. */
  readonly ast?: A.ModelFile;
  readonly problems: readonly SyntaxProblem[];
}

/**
 * Lexes and parses a model file, recovering from errors so that every syntax problem in the file
 * is reported, not just the first.
 */
export function parseFile(text: string, file: string): ParseResult {
  const { tokens, problems: lexProblems } = lex(text);
  // Brackets nested past the limit are found before parsing: error recovery over thousands of
  // unclosed brackets costs the parser time that grows with their square.
  const deep = bracketTooDeep(tokens);
  if (deep) return { problems: [...lexProblems, tooDeep(deep)].sort((a, b) => a.line - b.line || a.col - b.col) };
  const p = getParser();
  const errors: IRecognitionException[] = [];
  let cst: CstNode | undefined;
  // Parsing stops at a token that cannot start a top-level item; report it and go on from the
  // next line that starts one, so that later errors are found too.
  let from = 0;
  while (from < tokens.length) {
    p.input = tokens.slice(from);
    p.depth = 0;
    let tree: CstNode;
    try {
      tree = p.file();
    } catch (e) {
      if (!(e instanceof TooDeep)) throw e;
      p.input = []; // the parser is reused: keep no tokens alive
      return { problems: [...lexProblems, tooDeep(e.token)].sort((a, b) => a.line - b.line || a.col - b.col) };
    }
    cst ??= tree;
    // A '}' left over at the top level after an earlier error is that error's echo.
    const echo = (e: IRecognitionException) =>
      e.token.tokenType === RCurly &&
      e.message.startsWith(`expected ${RULE_WANTS['file']}`) &&
      (errors.length > 0 || lexProblems.length > 0 || p.errors.some((o) => o.token.startOffset < e.token.startOffset));
    errors.push(...p.errors.filter((e) => !echo(e)));
    const stop = p.errors.find((e) => e.name === 'NotAllInputParsedException' || (e.name === 'MismatchedTokenException' && e.message.startsWith(`expected ${RULE_WANTS['file']}`)));
    if (!stop) break;
    const at = tokens.indexOf(stop.token, from);
    let next = at + 1;
    while (next < tokens.length && !(TOP_START.has(tokens[next]!.tokenType) && isSepToken(tokens[next - 1]))) next++;
    from = next;
  }
  const end = lastPosition(text);
  const problems: SyntaxProblem[] = [...lexProblems];
  // A bad character or string makes the parser complain about the rest of its line: say it once.
  const lexedBadly = (line: number, col: number) => lexProblems.some((l) => l.line === line && l.col <= col);
  for (const e of errors) {
    const t = e.token;
    let line = t.startLine;
    let col = t.startColumn;
    let length = Math.max(1, t.image.length);
    if (t.tokenType === EOF || line === undefined || Number.isNaN(line)) {
      line = end.line;
      col = end.col;
      length = 1;
    } else if (t.tokenType === Newline) {
      length = 1;
    }
    if (lexedBadly(line ?? 1, col ?? 1)) continue;
    problems.push({ message: e.message, line: line ?? 1, col: col ?? 1, length });
  }
  // After the first error of a line, the rest of that line only echoes it: keep one per line.
  const seen = new Set<number>();
  const unique = problems
    .sort((a, b) => a.line - b.line || a.col - b.col)
    .filter((x) => {
      if (seen.has(x.line)) return false;
      seen.add(x.line);
      return true;
    });
  if (unique.length > 0 || !cst) return { problems: unique };
  return { ast: toAst(cst, file), problems: [] };
}

/** The first bracket opening level MAX_NESTING + 1 (each bracket is at least one level of the grammar). */
function bracketTooDeep(tokens: readonly IToken[]): IToken | undefined {
  let depth = 0;
  for (const t of tokens) {
    if (t.tokenType === LParen || t.tokenType === LBracket || t.tokenType === LCurly) {
      if (++depth > MAX_NESTING) return t;
    } else if (t.tokenType === RParen || t.tokenType === RBracket || t.tokenType === RCurly) {
      depth = Math.max(0, depth - 1);
    }
  }
  return undefined;
}

/** The problem at the token that opened one level too many (only this one: the rest of the file is not parsed). */
function tooDeep(t: IToken): SyntaxProblem {
  return {
    message: `this nests more than ${MAX_NESTING} levels deep (brackets, calls, indexing, blocks and operators count); split it up with 'let' or into functions`,
    line: t.startLine ?? 1,
    col: t.startColumn ?? 1,
    length: Math.max(1, t.image.length),
  };
}

// ---- CST to AST ----

type Children = Record<string, (CstNode | IToken)[] | undefined>;

function kids(n: CstNode): Children {
  return n.children as Children;
}
function node(c: Children, name: string, i = 0): CstNode | undefined {
  return c[name]?.[i] as CstNode | undefined;
}
function nodes(c: Children, name: string): CstNode[] {
  return (c[name] ?? []) as CstNode[];
}
function tok(c: Children, name: string, i = 0): IToken | undefined {
  return c[name]?.[i] as IToken | undefined;
}
function toks(c: Children, name: string): IToken[] {
  return (c[name] ?? []) as IToken[];
}
function must<T>(x: T | undefined): T {
  if (x === undefined) throw new Error('internal: incomplete syntax tree');
  return x;
}
function posOf(t: IToken): A.Pos {
  return { line: t.startLine ?? 1, col: t.startColumn ?? 1, length: Math.max(1, t.image.length) };
}
/** Tokens of one kind in source order, whichever child key (category) they were stored under. */
function tokensIn(c: Children, names: string[]): IToken[] {
  return names.flatMap((n) => toks(c, n)).sort((a, b) => a.startOffset - b.startOffset);
}

function unquote(s: string): string {
  return s.slice(1, -1).replace(/\\(.)/g, (_m, ch: string) => ({ n: '\n', t: '\t' } as Record<string, string>)[ch] ?? ch);
}

function toAst(cst: CstNode, file: string): A.ModelFile {
  const items: A.TopItem[] = [];
  for (const it of nodes(kids(cst), 'topLine').flatMap((l) => nodes(kids(l), 'topItem'))) {
    const c = kids(it);
    const sub = node(c, 'importDecl') ?? node(c, 'constDecl') ?? node(c, 'fnDecl') ?? node(c, 'modelDecl');
    if (!sub) continue;
    switch (sub.name) {
      case 'importDecl': {
        const k = kids(sub);
        const s = must(tok(k, 'StringLit'));
        const alias = tok(k, 'Ident');
        items.push({ kind: 'import', path: unquote(s.image), ...(alias ? { alias: alias.image } : {}), pos: posOf(s) });
        break;
      }
      case 'constDecl':
        items.push(constDecl(sub));
        break;
      case 'fnDecl': {
        const k = kids(sub);
        const name = must(tok(k, 'Ident'));
        const pl = node(k, 'paramList');
        items.push({ kind: 'fn', name: name.image, params: pl ? paramList(pl) : [], body: body(must(node(k, 'body'))), pos: posOf(name) });
        break;
      }
      case 'modelDecl': {
        const k = kids(sub);
        const name = must(tok(k, 'Ident'));
        const pl = node(k, 'paramList');
        items.push({ kind: 'model', name: name.image, params: pl ? paramList(pl) : [], body: body(must(node(k, 'body'))), pos: posOf(name) });
        break;
      }
    }
  }
  return { file, items };
}

function constDecl(n: CstNode): A.ConstDecl {
  const k = kids(n);
  const name = must(tok(k, 'Ident'));
  const t = node(k, 'typeExpr');
  return { kind: 'const', name: name.image, ...(t ? { type: typeExpr(t) } : {}), value: expr(must(node(k, 'expr'))), pos: posOf(name) };
}

function paramList(n: CstNode): A.FnParam[] {
  return nodes(kids(n), 'fnParam').map((p) => {
    const k = kids(p);
    const name = must(tok(k, 'Ident'));
    const t = node(k, 'typeExpr');
    const d = node(k, 'expr');
    return { name: name.image, ...(t ? { type: typeExpr(t) } : {}), ...(d ? { default: expr(d) } : {}), pos: posOf(name) };
  });
}

function typeExpr(n: CstNode): A.TypeExpr {
  const k = kids(n);
  const name = must(tok(k, 'Ident'));
  if (!tok(k, 'LBracket')) return { name: name.image, pos: posOf(name) };
  const dims: A.Dim[] = nodes(k, 'dim').map((d) => {
    const dk = kids(d);
    const e = tok(dk, 'Ellipsis');
    if (e) return { kind: 'rest', pos: posOf(e) };
    const x = expr(must(node(dk, 'expr')));
    if (x.kind === 'name' && x.name === '_') return { kind: 'any', pos: x.pos };
    return { kind: 'expr', expr: x };
  });
  return { name: name.image, dims, pos: posOf(name) };
}

function body(n: CstNode): A.Stmt[] {
  return nodes(kids(n), 'stmtLine').flatMap((l) => nodes(kids(l), 'statement')).map(statement);
}

function firstToken(n: CstNode): IToken {
  let best: IToken | undefined;
  const visit = (x: CstNode) => {
    for (const list of Object.values(x.children)) {
      for (const e of list ?? []) {
        if ('image' in e) {
          if (!best || e.startOffset < best.startOffset) best = e;
        } else visit(e as CstNode);
      }
    }
  };
  visit(n);
  return must(best);
}

function statement(n: CstNode): A.Stmt {
  const c = kids(n);
  const [key] = Object.keys(c);
  const s = must(node(c, must(key)));
  const k = kids(s);
  switch (s.name) {
    case 'letStmt':
      return { kind: 'let', pattern: pattern(must(node(k, 'pattern'))), value: expr(must(node(k, 'expr'))), pos: posOf(must(tok(k, 'LetKw'))) };
    case 'inputStmt': {
      const name = must(tok(k, 'Ident'));
      return { kind: 'input', name: name.image, type: typeExpr(must(node(k, 'typeExpr'))), pos: posOf(name) };
    }
    case 'paramStmt': {
      const name = must(tok(k, 'Ident'));
      return { kind: 'param', name: name.image, type: typeExpr(must(node(k, 'typeExpr'))), init: expr(must(node(k, 'expr'))), pos: posOf(name) };
    }
    case 'constDecl':
      return constDecl(s);
    case 'outputStmt': {
      const name = must(tok(k, 'Ident'));
      const e = node(k, 'expr');
      return { kind: 'output', name: name.image, ...(e ? { value: expr(e) } : {}), pos: posOf(name) };
    }
    case 'lossStmt':
      return { kind: 'loss', value: expr(must(node(k, 'expr'))), pos: posOf(must(tok(k, 'LossKw'))) };
    case 'returnStmt':
      return { kind: 'return', values: nodes(k, 'expr').map(expr), pos: posOf(must(tok(k, 'ReturnKw'))) };
    case 'blockStmt': {
      const kw = must(tok(k, 'BlockKw'));
      const name = tok(k, 'StringLit');
      const exprs = nodes(k, 'expr');
      // The optional ipu/stage/phase expressions appear in that order; match them to their keywords.
      const keyed: Record<string, A.Expr> = {};
      const kws = tokensIn(k, ['IpuKw', 'StageKw', 'PhaseKw']);
      kws.forEach((t, i) => (keyed[t.image] = expr(must(exprs[i]))));
      return {
        kind: 'block',
        ...(name ? { name: unquote(name.image) } : {}),
        ...(keyed['ipu'] ? { ipu: keyed['ipu'] } : {}),
        ...(keyed['stage'] ? { stage: keyed['stage'] } : {}),
        ...(keyed['phase'] ? { phase: keyed['phase'] } : {}),
        body: body(must(node(k, 'body'))),
        pos: posOf(kw),
      };
    }
    case 'multiConvStmt': {
      const names = tokensIn(k, ['Ident']);
      const values = nodes(k, 'expr');
      const options = names.map((n, i) => ({ name: n.image, namePos: posOf(n), value: expr(must(values[i])) }));
      return { kind: 'multi_conv', options, body: body(must(node(k, 'body'))), pos: posOf(must(tok(k, 'Multi_convKw'))) };
    }
    case 'scopeStmt':
      return { kind: 'scope', name: unquote(must(tok(k, 'StringLit')).image), body: body(must(node(k, 'body'))), pos: posOf(must(tok(k, 'ScopeKw'))) };
    case 'ifStmt':
      return ifStmt(s);
    case 'forStmt': {
      const name = must(tok(k, 'Ident'));
      return { kind: 'for', name: name.image, iterable: expr(must(node(k, 'expr'))), body: body(must(node(k, 'body'))), pos: posOf(must(tok(k, 'ForKw'))) };
    }
    default: {
      const e = expr(s);
      return { kind: 'expr', expr: e, pos: posOf(firstToken(s)) };
    }
  }
}

function ifStmt(s: CstNode): A.Stmt {
  const k = kids(s);
  const bodies = nodes(k, 'body');
  const elseIf = node(k, 'ifStmt');
  const elseBody = elseIf ? [ifStmt(elseIf)] : bodies[1] ? body(bodies[1]) : undefined;
  return {
    kind: 'if',
    cond: expr(must(node(k, 'expr'))),
    then: body(must(bodies[0])),
    ...(elseBody ? { else: elseBody } : {}),
    pos: posOf(must(tok(k, 'IfKw'))),
  };
}

function pattern(n: CstNode): A.Pattern {
  const k = kids(n);
  const id = tok(k, 'Ident');
  if (id) return id.image === '_' ? { kind: 'ignore', pos: posOf(id) } : { kind: 'bind', name: id.image, pos: posOf(id) };
  return { kind: 'tuple', items: nodes(k, 'pattern').map(pattern), pos: posOf(must(tok(k, 'LParen'))) };
}

const BINARY_LEVELS: Record<string, string> = { expr: 'andExpr', andExpr: 'cmpExpr', cmpExpr: 'addExpr', addExpr: 'mulExpr', mulExpr: 'unaryExpr' };
const OPERATOR_KEYS: Record<string, string[]> = {
  expr: ['OrOr'],
  andExpr: ['AndAnd'],
  cmpExpr: ['CmpOp'],
  addExpr: ['AddOp'],
  mulExpr: ['MulOp'],
};

function expr(n: CstNode): A.Expr {
  const k = kids(n);
  const next = BINARY_LEVELS[n.name];
  if (next) {
    const operands = nodes(k, next).map(expr);
    const ops = tokensIn(k, must(OPERATOR_KEYS[n.name]));
    let left = must(operands[0]);
    ops.forEach((t, i) => {
      left = { kind: 'binary', op: t.image as A.BinaryOp, left, right: must(operands[i + 1]), pos: posOf(t) };
    });
    return left;
  }
  switch (n.name) {
    case 'unaryExpr': {
      const p = node(k, 'powExpr');
      if (p) return expr(p);
      const t = must(tok(k, 'Minus') ?? tok(k, 'Bang'));
      return { kind: 'unary', op: t.image as '-' | '!', operand: expr(must(node(k, 'unaryExpr'))), pos: posOf(t) };
    }
    case 'powExpr': {
      const base = expr(must(node(k, 'postfixExpr')));
      const t = tok(k, 'StarStar');
      if (!t) return base;
      return { kind: 'binary', op: '**', left: base, right: expr(must(node(k, 'unaryExpr'))), pos: posOf(t) };
    }
    case 'postfixExpr':
      return postfix(n);
    case 'primary':
      return primary(n);
    default:
      throw new Error(`internal: unexpected syntax node ${n.name}`);
  }
}

function postfix(n: CstNode): A.Expr {
  const k = kids(n);
  let e = primary(must(node(k, 'primary')));
  // Suffixes in source order: calls, index brackets and `.name` members.
  const suffixes: { offset: number; apply: (e: A.Expr) => A.Expr }[] = [];
  for (const c of nodes(k, 'callSuffix')) {
    suffixes.push({ offset: firstToken(c).startOffset, apply: (target) => callSuffix(c, target) });
  }
  for (const c of nodes(k, 'indexSuffix')) {
    suffixes.push({ offset: firstToken(c).startOffset, apply: (target) => indexSuffix(c, target) });
  }
  for (const name of toks(k, 'Ident')) {
    suffixes.push({ offset: name.startOffset, apply: (target) => ({ kind: 'member', target, name: name.image, pos: posOf(name) }) });
  }
  suffixes.sort((a, b) => a.offset - b.offset);
  for (const s of suffixes) e = s.apply(e);
  return e;
}

function callSuffix(n: CstNode, callee: A.Expr): A.Expr {
  const k = kids(n);
  const args: A.Arg[] = nodes(k, 'arg').map((a) => {
    const ak = kids(a);
    const name = tok(ak, 'Ident');
    const value = expr(must(node(ak, 'expr')));
    return name ? { name: name.image, namePos: posOf(name), value } : { value };
  });
  const asNode = node(k, 'asName');
  const pos = callee.kind === 'name' || callee.kind === 'member' ? callee.pos : posOf(must(tok(k, 'LParen')));
  return { kind: 'call', callee, args, ...(asNode ? { as: asName(asNode) } : {}), pos };
}

function asName(n: CstNode): A.AsName {
  const segs = nodes(kids(n), 'asSegment');
  const segments: ({ name: string } | { index: A.Expr })[] = [];
  for (const s of segs) {
    const k = kids(s);
    const head = must(tok(k, 'Ident') ?? tok(k, 'NumberLit'));
    segments.push({ name: head.image });
    for (const e of nodes(k, 'expr')) segments.push({ index: expr(e) });
  }
  const first = firstToken(n);
  const last = lastToken(n);
  return { segments, pos: { line: first.startLine ?? 1, col: first.startColumn ?? 1, length: Math.max(1, (last.endOffset ?? last.startOffset) - first.startOffset + 1) } };
}

function lastToken(n: CstNode): IToken {
  let best: IToken | undefined;
  const visit = (x: CstNode) => {
    for (const list of Object.values(x.children)) {
      for (const e of list ?? []) {
        if ('image' in e) {
          if (!best || e.startOffset > best.startOffset) best = e;
        } else visit(e as CstNode);
      }
    }
  };
  visit(n);
  return must(best);
}

function indexSuffix(n: CstNode, target: A.Expr): A.Expr {
  const k = kids(n);
  const subscripts: A.Subscript[] = nodes(k, 'subscript').map((s) => {
    const sk = kids(s);
    const ell = tok(sk, 'Ellipsis');
    if (ell) return { kind: 'ellipsis', pos: posOf(ell) };
    const start = node(sk, 'expr');
    const tail = node(sk, 'sliceTail');
    if (!tail) return { kind: 'at', index: expr(must(start)), pos: posOf(firstToken(must(start))) };
    const tk = kids(tail);
    const colons = toks(tk, 'Colon');
    const tailExprs = nodes(tk, 'expr');
    // stop precedes the second colon; step follows it
    let stop: A.Expr | undefined;
    let step: A.Expr | undefined;
    for (const e of tailExprs) {
      const off = firstToken(e).startOffset;
      if (colons.length > 1 && off > colons[1]!.startOffset) step = expr(e);
      else stop = expr(e);
    }
    const pos = start ? posOf(firstToken(start)) : posOf(must(colons[0]));
    return { kind: 'slice', ...(start ? { start: expr(start) } : {}), ...(stop ? { stop } : {}), ...(step ? { step } : {}), pos };
  });
  return { kind: 'index', target, subscripts, pos: posOf(must(tok(k, 'LBracket'))) };
}

function primary(n: CstNode): A.Expr {
  const k = kids(n);
  const num = tok(k, 'NumberLit');
  if (num) return { kind: 'num', value: Number(num.image), pos: posOf(num) };
  const str = tok(k, 'StringLit');
  if (str) return { kind: 'str', value: unquote(str.image), pos: posOf(str) };
  const t = tok(k, 'TrueKw') ?? tok(k, 'FalseKw');
  if (t) return { kind: 'bool', value: t.tokenType === True, pos: posOf(t) };
  const id = tok(k, 'Ident');
  if (id) return { kind: 'name', name: id.image, pos: posOf(id) };
  const list = node(k, 'exprList');
  const items = list ? nodes(kids(list), 'expr').map(expr) : [];
  const lp = tok(k, 'LParen');
  if (lp) {
    const trailingComma = list ? toks(kids(list), 'Comma').length >= items.length && items.length > 0 : false;
    if (items.length === 1 && !trailingComma) return must(items[0]);
    return { kind: 'tuple', items, pos: posOf(lp) };
  }
  return { kind: 'list', items, pos: posOf(must(tok(k, 'LBracket'))) };
}
