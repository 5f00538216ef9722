/**
 * The tokens and the chevrotain grammar of one line of the text IR (see printer.ts for the
 * format); parser.ts reads a text line by line with them.
 */
import { CstParser, EOF, IParserErrorMessageProvider, IToken, Lexer, TokenType, createToken, tokenLabel } from './chevrotain.js';

// ---- tokens ----

export const Word = createToken({ name: 'Word', pattern: Lexer.NA, label: 'a name' });
export const Identifier = createToken({ name: 'Identifier', pattern: /[A-Za-z_][A-Za-z0-9_.]*/, categories: [Word], label: 'a name' });
const keyword = (word: string) =>
  createToken({ name: `Kw_${word}`, pattern: new RegExp(word), longer_alt: Identifier, categories: [Word], label: `'${word}'` });
export const GraphKw = keyword('graph');
export const OutputKw = keyword('output');
export const LocKw = keyword('loc');
export const InKw = keyword('in');
export const ValueRef = createToken({ name: 'ValueRef', pattern: /%(?:[A-Za-z_][A-Za-z0-9_.]*|[0-9]+)/, label: 'a value (%name)' });
export const GraphName = createToken({ name: 'GraphName', pattern: /@(?:[A-Za-z_][A-Za-z0-9_.]*|"(?:[^"\\\n\r]|\\.)*")/, label: 'a graph name (@name)' });
export const StringLit = createToken({ name: 'StringLit', pattern: /"(?:[^"\\\n\r]|\\.)*"/, label: 'a string' });
export const NumberLit = createToken({ name: 'NumberLit', pattern: /-inf|-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?/, label: 'a number' });
const punct = (name: string, ch: string) => createToken({ name, pattern: ch, label: `'${ch}'` });
export const Equals = punct('Equals', '=');
export const Comma = punct('Comma', ',');
export const Colon = punct('Colon', ':');
export const LParen = punct('LParen', '(');
export const RParen = punct('RParen', ')');
export const LCurly = punct('LCurly', '{');
export const RCurly = punct('RCurly', '}');
export const LBracket = punct('LBracket', '[');
export const RBracket = punct('RBracket', ']');
export const Less = punct('Less', '<');
export const Greater = punct('Greater', '>');
const WhiteSpace = createToken({ name: 'WhiteSpace', pattern: /[ \t\r]+/, group: Lexer.SKIPPED });
const Comment = createToken({ name: 'Comment', pattern: /\/\/[^\n]*/, group: Lexer.SKIPPED });

const ALL_TOKENS: TokenType[] = [
  WhiteSpace, Comment,
  GraphKw, OutputKw, LocKw, InKw, Identifier, Word,
  ValueRef, GraphName, StringLit, NumberLit,
  Equals, Comma, Colon, LParen, RParen, LCurly, RCurly, LBracket, RBracket, Less, Greater,
];

// ---- grammar ----

/** Lines are parsed one at a time: the parser's end of input is the end of a line. */
export function describeToken(t: IToken | undefined): string {
  if (!t || t.tokenType === EOF) return 'the end of the line';
  return `'${t.image}'`;
}

function label(t: TokenType): string {
  return t === EOF ? 'the end of the line' : tokenLabel(t);
}

function listLabels(types: readonly TokenType[]): string {
  const labels = [...new Set(types.map(label))];
  return labels.length <= 1 ? (labels[0] ?? 'more input') : `${labels.slice(0, -1).join(', ')} or ${labels[labels.length - 1]}`;
}

const MESSAGES: IParserErrorMessageProvider = {
  buildMismatchTokenMessage: ({ expected, actual }) => `expected ${label(expected)} but found ${describeToken(actual)}`,
  buildNotAllInputParsedMessage: ({ firstRedundant }) => `expected the end of the line but found ${describeToken(firstRedundant)}`,
  buildNoViableAltMessage: ({ expectedPathsPerAlt, actual }) =>
    `expected ${listLabels(expectedPathsPerAlt.flat().map((p) => p[0]!).filter(Boolean))} but found ${describeToken(actual[0])}`,
  buildEarlyExitMessage: ({ expectedIterationPaths, actual }) =>
    `expected ${listLabels(expectedIterationPaths.map((p) => p[0]!).filter(Boolean))} but found ${describeToken(actual[0])}`,
};

/**
 * The most levels values may nest on one line (lists in lists, `name<key = value>` in one
 * another). The printer writes at most three; the parser recurses once per level.
 */
export const MAX_TEXT_NESTING = 64;

/** Thrown out of the parser (chevrotain passes on errors that are not its own) at the level past MAX_TEXT_NESTING. */
export class TooDeep extends Error {
  constructor(readonly token: IToken) {
    super('nesting too deep');
  }
}

export class TextIrParser extends CstParser {
  /** Levels open at the current token. */
  depth = 0;

  constructor() {
    super(ALL_TOKENS, { recoveryEnabled: true, maxLookahead: 3, errorMessageProvider: MESSAGES });
    this.performSelfAnalysis();
  }

  private nested<T>(at: IToken, f: () => T): T {
    if (++this.depth > MAX_TEXT_NESTING && !this.RECORDING_PHASE) {
      this.depth--;
      throw new TooDeep(at);
    }
    try {
      return f();
    } finally {
      this.depth--;
    }
  }

  /** `graph @name {` */
  header = this.RULE('header', () => {
    this.CONSUME(GraphKw);
    this.CONSUME(GraphName);
    this.CONSUME(LCurly);
  });

  /** `}` */
  footer = this.RULE('footer', () => {
    this.CONSUME(RCurly);
  });

  statement = this.RULE('statement', () => {
    this.OR([{ ALT: () => this.SUBRULE(this.outputStmt) }, { ALT: () => this.SUBRULE(this.opStmt) }]);
  });

  outputStmt = this.RULE('outputStmt', () => {
    this.CONSUME(OutputKw);
    this.CONSUME(StringLit);
    this.CONSUME(Equals);
    this.CONSUME(ValueRef);
  });

  opStmt = this.RULE('opStmt', () => {
    this.OPTION(() => {
      this.CONSUME(ValueRef, { LABEL: 'result' });
      this.MANY(() => {
        this.CONSUME(Comma);
        this.CONSUME2(ValueRef, { LABEL: 'result' });
      });
      this.CONSUME(Equals);
    });
    this.CONSUME(Identifier, { LABEL: 'kind' });
    this.OPTION2(() => {
      this.CONSUME(LParen);
      this.OPTION3(() => {
        this.CONSUME3(ValueRef, { LABEL: 'operand' });
        this.MANY2(() => {
          this.CONSUME2(Comma);
          this.CONSUME4(ValueRef, { LABEL: 'operand' });
        });
      });
      this.CONSUME(RParen);
    });
    this.OPTION4(() => {
      this.CONSUME(LCurly);
      this.OPTION5(() => {
        this.SUBRULE(this.entry, { LABEL: 'attr' });
        this.MANY3(() => {
          this.CONSUME3(Comma);
          this.SUBRULE2(this.entry, { LABEL: 'attr' });
        });
      });
      this.CONSUME(RCurly);
    });
    this.OPTION6(() => {
      this.CONSUME(LBracket);
      this.OPTION7(() => {
        this.SUBRULE3(this.entry, { LABEL: 'annotation' });
        this.MANY4(() => {
          this.CONSUME4(Comma);
          this.SUBRULE4(this.entry, { LABEL: 'annotation' });
        });
      });
      this.CONSUME(RBracket);
    });
    this.OPTION8(() => {
      this.CONSUME(Colon);
      this.SUBRULE(this.type);
      this.MANY5(() => {
        this.CONSUME5(Comma);
        this.SUBRULE2(this.type);
      });
    });
    this.OPTION9(() => {
      this.CONSUME(LocKw);
      this.CONSUME2(LParen);
      this.SUBRULE(this.frame);
      this.MANY6(() => {
        this.CONSUME6(Comma);
        this.SUBRULE2(this.frame);
      });
      this.CONSUME2(RParen);
    });
  });

  entry = this.RULE('entry', () => {
    this.CONSUME(Word, { LABEL: 'key' });
    this.CONSUME(Equals);
    this.SUBRULE(this.value);
  });

  value = this.RULE('value', () => {
    this.OR([
      { ALT: () => this.CONSUME(NumberLit) },
      { ALT: () => this.CONSUME(StringLit) },
      { ALT: () => this.CONSUME(GraphName) },
      {
        ALT: () => {
          this.CONSUME(Word);
          this.OPTION(() => {
            const open = this.CONSUME(Less);
            this.nested(open, () => this.SUBRULE(this.angleBody));
            this.CONSUME(Greater);
          });
        },
      },
      { ALT: () => this.SUBRULE(this.list) },
    ]);
  });

  list = this.RULE('list', () => {
    const open = this.CONSUME(LBracket);
    this.nested(open, () =>
      this.OPTION(() => {
        this.SUBRULE(this.value, { LABEL: 'item' });
        this.MANY(() => {
          this.CONSUME(Comma);
          this.SUBRULE2(this.value, { LABEL: 'item' });
        });
      }),
    );
    this.CONSUME(RBracket);
  });

  /** `dense<type, payload>` or `fn<key = value, ...>`. */
  angleBody = this.RULE('angleBody', () => {
    this.OR([
      {
        ALT: () => {
          this.SUBRULE(this.type);
          this.CONSUME(Comma);
          this.SUBRULE(this.value, { LABEL: 'payload' });
        },
      },
      {
        ALT: () => {
          this.OPTION(() => {
            this.SUBRULE(this.entry);
            this.MANY(() => {
              this.CONSUME2(Comma);
              this.SUBRULE2(this.entry);
            });
          });
        },
      },
    ]);
  });

  type = this.RULE('type', () => {
    this.CONSUME(Word, { LABEL: 'dtype' });
    this.CONSUME(LBracket);
    this.OPTION(() => {
      this.CONSUME(NumberLit, { LABEL: 'dim' });
      this.MANY(() => {
        this.CONSUME(Comma);
        this.CONSUME2(NumberLit, { LABEL: 'dim' });
      });
    });
    this.CONSUME(RBracket);
  });

  frame = this.RULE('frame', () => {
    this.CONSUME(StringLit, { LABEL: 'file' });
    this.OPTION(() => {
      this.CONSUME(Colon);
      this.CONSUME(NumberLit, { LABEL: 'line' });
      this.OPTION2(() => {
        this.CONSUME2(Colon);
        this.CONSUME2(NumberLit, { LABEL: 'col' });
      });
    });
    this.OPTION3(() => {
      this.CONSUME3(Colon);
      this.CONSUME2(StringLit, { LABEL: 'name' });
    });
    this.OPTION4(() => {
      this.CONSUME(InKw);
      this.OR([{ ALT: () => this.CONSUME(Word, { LABEL: 'fn' }) }, { ALT: () => this.CONSUME3(StringLit, { LABEL: 'fn' }) }]);
    });
  });
}

export const LEXER = new Lexer(ALL_TOKENS, { positionTracking: 'onlyOffset' });
