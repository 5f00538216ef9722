import { IToken, Lexer, TokenType, createToken, createTokenInstance } from '@tilegraph/ir/chevrotain';

/**
 * Tokens of the tilegraph model language. Statements end at a newline or ';' (both become a
 * `Sep` token); newlines inside brackets, or after a token that cannot end a statement, are
 * dropped before parsing (see `layoutTokens`).
 */

export const Sep = createToken({ name: 'Sep', pattern: Lexer.NA, label: 'end of statement' });
export const Newline = createToken({ name: 'Newline', pattern: /\r?\n/, categories: [Sep], label: 'newline', line_breaks: true });
export const Semicolon = createToken({ name: 'Semicolon', pattern: /;/, categories: [Sep], label: "';'" });
const WhiteSpace = createToken({ name: 'WhiteSpace', pattern: /[ \t\f\r]+/, group: Lexer.SKIPPED });
const Comment = createToken({ name: 'Comment', pattern: /#[^\n]*/, group: Lexer.SKIPPED });

export const Ident = createToken({ name: 'Ident', pattern: /[A-Za-z_][A-Za-z0-9_]*/, label: 'a name' });

function keyword(word: string, contextual = false): TokenType {
  return createToken({
    name: word[0]!.toUpperCase() + word.slice(1) + 'Kw',
    pattern: new RegExp(word),
    longer_alt: Ident,
    label: `'${word}'`,
    ...(contextual ? { categories: [Ident] } : {}),
  });
}

// Reserved words: never names.
export const Let = keyword('let');
export const Fn = keyword('fn');
export const Import = keyword('import');
export const Const = keyword('const');
export const Return = keyword('return');
export const If = keyword('if');
export const Else = keyword('else');
export const For = keyword('for');
export const True = keyword('true');
export const False = keyword('false');
export const As = keyword('as');
// Contextual words: keywords where a statement starts, names everywhere else.
export const Model = keyword('model', true);
export const Input = keyword('input', true);
export const Param = keyword('param', true);
export const Output = keyword('output', true);
export const Loss = keyword('loss', true);
export const Block = keyword('block', true);
export const Scope = keyword('scope', true);
export const MultiConv = keyword('multi_conv', true);
export const Ipu = keyword('ipu', true);
export const Stage = keyword('stage', true);
export const Phase = keyword('phase', true);
export const In = keyword('in', true);

export const NumberLit = createToken({ name: 'NumberLit', pattern: /\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/, label: 'a number' });
export const StringLit = createToken({ name: 'StringLit', pattern: /"(?:[^"\\\n]|\\.)*"/, label: 'a string' });
/** A string missing its closing quote; reported by the lexer step, never given to the parser. */
export const BadString = createToken({ name: 'BadString', pattern: /"(?:[^"\\\n]|\\.)*/ });

export const Ellipsis = createToken({ name: 'Ellipsis', pattern: /\.\.\./, label: "'...'" });
export const Dot = createToken({ name: 'Dot', pattern: /\./, label: "'.'" });
export const Comma = createToken({ name: 'Comma', pattern: /,/, label: "','" });
export const Colon = createToken({ name: 'Colon', pattern: /:/, label: "':'" });
export const LParen = createToken({ name: 'LParen', pattern: /\(/, label: "'('" });
export const RParen = createToken({ name: 'RParen', pattern: /\)/, label: "')'" });
export const LBracket = createToken({ name: 'LBracket', pattern: /\[/, label: "'['" });
export const RBracket = createToken({ name: 'RBracket', pattern: /\]/, label: "']'" });
export const LCurly = createToken({ name: 'LCurly', pattern: /\{/, label: "'{'" });
export const RCurly = createToken({ name: 'RCurly', pattern: /\}/, label: "'}'" });

export const CmpOp = createToken({ name: 'CmpOp', pattern: Lexer.NA, label: 'a comparison' });
export const EqEq = createToken({ name: 'EqEq', pattern: /==/, categories: [CmpOp], label: "'=='" });
export const NotEq = createToken({ name: 'NotEq', pattern: /!=/, categories: [CmpOp], label: "'!='" });
export const LessEq = createToken({ name: 'LessEq', pattern: /<=/, categories: [CmpOp], label: "'<='" });
export const GreaterEq = createToken({ name: 'GreaterEq', pattern: />=/, categories: [CmpOp], label: "'>='" });
export const Less = createToken({ name: 'Less', pattern: /</, categories: [CmpOp], label: "'<'" });
export const Greater = createToken({ name: 'Greater', pattern: />/, categories: [CmpOp], label: "'>'" });
export const Assign = createToken({ name: 'Assign', pattern: /=/, label: "'='" });
export const AndAnd = createToken({ name: 'AndAnd', pattern: /&&/, label: "'&&'" });
export const OrOr = createToken({ name: 'OrOr', pattern: /\|\|/, label: "'||'" });
export const Bang = createToken({ name: 'Bang', pattern: /!/, label: "'!'" });

export const AddOp = createToken({ name: 'AddOp', pattern: Lexer.NA, label: "'+' or '-'" });
export const Plus = createToken({ name: 'Plus', pattern: /\+/, categories: [AddOp], label: "'+'" });
export const Minus = createToken({ name: 'Minus', pattern: /-/, categories: [AddOp], label: "'-'" });
export const MulOp = createToken({ name: 'MulOp', pattern: Lexer.NA, label: "'*', '/', '//', '%' or '@'" });
export const StarStar = createToken({ name: 'StarStar', pattern: /\*\*/, label: "'**'" });
export const Star = createToken({ name: 'Star', pattern: /\*/, categories: [MulOp], label: "'*'" });
export const SlashSlash = createToken({ name: 'SlashSlash', pattern: /\/\//, categories: [MulOp], label: "'//'" });
export const Slash = createToken({ name: 'Slash', pattern: /\//, categories: [MulOp], label: "'/'" });
export const Percent = createToken({ name: 'Percent', pattern: /%/, categories: [MulOp], label: "'%'" });
export const At = createToken({ name: 'At', pattern: /@/, categories: [MulOp], label: "'@'" });

export const ALL_TOKENS: TokenType[] = [
  WhiteSpace,
  Comment,
  Newline,
  Semicolon,
  Let, Fn, Import, Const, Return, If, Else, For, True, False, As,
  Model, Input, Param, Output, Loss, Block, Scope, MultiConv, Ipu, Stage, Phase, In,
  Ident,
  NumberLit,
  StringLit,
  BadString,
  Ellipsis,
  Dot,
  Comma,
  Colon,
  LParen, RParen, LBracket, RBracket, LCurly, RCurly,
  EqEq, NotEq, LessEq, GreaterEq, Less, Greater, Assign,
  AndAnd, OrOr, Bang,
  Plus, Minus, StarStar, Star, SlashSlash, Slash, Percent, At,
  Sep, CmpOp, AddOp, MulOp,
];

const LEXER_CONFIG = { positionTracking: 'full', ensureOptimizations: false } as const;

let lexer: Lexer | undefined;
function getLexer(): Lexer {
  // the token definitions are fixed: their validations run in the grammar's test (lexerProblems)
  lexer ??= new Lexer(ALL_TOKENS, { ...LEXER_CONFIG, skipValidations: true });
  return lexer;
}

/** The problems chevrotain's validations find in the token definitions (none, when they are sound). */
export function lexerProblems(): string[] {
  try {
    return new Lexer(ALL_TOKENS, { ...LEXER_CONFIG, deferDefinitionErrorsHandling: true }).lexerDefinitionErrors.map((e) => e.message);
  } catch (e) {
    return [e instanceof Error ? e.message : String(e)];
  }
}

export interface LexProblem {
  readonly message: string;
  readonly line: number;
  readonly col: number;
  readonly length: number;
}

/** Tokens after which a line break does not end the statement (the expression goes on). */
const CONTINUES = new Set<TokenType>([
  Comma, Colon, Dot, LParen, LBracket, As,
  EqEq, NotEq, LessEq, GreaterEq, Less, Greater, AndAnd, OrOr, Bang,
  Plus, Minus, StarStar, Star, SlashSlash, Slash, Percent, At,
]);

const STATEMENT_START = new Set<TokenType>([Let, Return, Const, Fn, Import, If, For]);

/** Whether `t` (first on its line) begins a statement; contextual words are judged by the next token. */
function startsStatement(t: IToken, next: IToken | undefined): boolean {
  if (STATEMENT_START.has(t.tokenType)) return true;
  const n = next?.tokenType;
  if (n === undefined) return false;
  if (t.tokenType === Input || t.tokenType === Param || t.tokenType === Output || t.tokenType === Model) return n === Ident || (n.CATEGORIES ?? []).includes(Ident);
  if (t.tokenType === Loss) return n === Assign;
  if (t.tokenType === Block || t.tokenType === Scope) return n === StringLit || n === LCurly;
  if (t.tokenType === MultiConv) return n === LCurly || n === Ident || (n.CATEGORIES ?? []).includes(Ident);
  return false;
}

function virtualSep(at: IToken): IToken {
  return createTokenInstance(
    Sep, '', at.startOffset, at.startOffset - 1,
    at.startLine ?? 1, at.startLine ?? 1, at.startColumn ?? 1, (at.startColumn ?? 1) - 1,
  );
}

/**
 * Applies the layout rules: drops line breaks inside () and [] and after a token that cannot end
 * a statement, merges runs of separators, ends the statement before every '}' and at the end of
 * the file. The grammar can then require a separator after each statement.
 */
export function layoutTokens(tokens: readonly IToken[], text: string): IToken[] {
  const out: IToken[] = [];
  let depth = 0;
  let lastNewline: IToken | undefined;
  const isSep = (t: IToken | undefined) => t !== undefined && (t.tokenType === Newline || t.tokenType === Semicolon || t.tokenType === Sep);
  let lineStart = true;
  tokens.forEach((t, i) => {
    const prev = out[out.length - 1];
    // A statement word at the start of a line cannot be inside an expression: an unclosed
    // bracket before it is an error, and the statement still starts here.
    if (lineStart && depth > 0 && startsStatement(t, tokens[i + 1])) {
      depth = 0;
      const nl = lastNewline;
      if (nl && prev && !isSep(prev)) out.push(nl);
    }
    lineStart = t.tokenType === Newline;
    if (t.tokenType === Newline) {
      lastNewline = t;
      if (depth > 0 || prev === undefined || isSep(prev) || CONTINUES.has(prev.tokenType) || prev.tokenType === LCurly) return;
      out.push(t);
      return;
    }
    if (t.tokenType === LParen || t.tokenType === LBracket) depth++;
    else if ((t.tokenType === RParen || t.tokenType === RBracket) && depth > 0) depth--;
    else if (t.tokenType === RCurly) {
      depth = 0;
      if (prev && !isSep(prev) && prev.tokenType !== LCurly) out.push(virtualSep(t));
    } else if (t.tokenType === LCurly) depth = 0;
    if (t.tokenType === Semicolon && isSep(prev)) return;
    out.push(t);
  });
  const last = out[out.length - 1];
  if (last && !isSep(last)) {
    const end = lastPosition(text);
    out.push(createTokenInstance(Sep, '', text.length, text.length - 1, end.line, end.line, end.col, end.col - 1));
  }
  return out;
}

/** Line and column just after the last character of `text`. */
export function lastPosition(text: string): { line: number; col: number } {
  const lines = text.split('\n');
  return { line: lines.length, col: lines[lines.length - 1]!.length + 1 };
}

export interface LexResult {
  readonly tokens: IToken[];
  readonly problems: LexProblem[];
}

export function lex(text: string): LexResult {
  const r = getLexer().tokenize(text);
  const problems: LexProblem[] = r.errors.map((e) => {
    const ch = text.slice(e.offset, e.offset + e.length);
    const what = e.length === 1 ? `unexpected character '${ch}'` : `unexpected characters '${ch}'`;
    return { message: what, line: e.line ?? 1, col: e.column ?? 1, length: e.length };
  });
  const tokens: IToken[] = [];
  for (const t of r.tokens) {
    if (t.tokenType === BadString) {
      problems.push({ message: 'string is not closed (add \'"\' before the end of the line)', line: t.startLine ?? 1, col: t.startColumn ?? 1, length: 1 });
      continue;
    }
    tokens.push(t);
  }
  problems.sort((a, b) => a.line - b.line || a.col - b.col);
  return { tokens: layoutTokens(tokens, text), problems };
}
