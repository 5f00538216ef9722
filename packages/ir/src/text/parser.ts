/**
 * Reads the text form written by printer.ts back into a Graph. The text is line-based (one
 * statement per line), so each line is lexed and parsed on its own with chevrotain and analysed
 * at once: memory stays proportional to the graph, not to the token count, and a syntax error
 * never runs past its line. Chevrotain's error recovery continues within a line, and every line
 * is checked, so one run reports all syntax errors; when there are none, the semantic errors
 * (unknown ops and values, bad attributes, types that disagree with inference, via verifyGraph)
 * are reported together. Every diagnostic points at the offending token.
 */
import { CstNode, EOF, ILexingError, IRecognitionException, IToken } from './chevrotain.js';
import { AttrValue, InitSpec } from '../attributes.js';
import { DTYPES, DType, dtypeByteSize, dtypeShortName, halfBitsToFloat, integerRange, isInteger, isLowFloat, isNarrowInt, narrowElementFromBits, parseDType } from '../dtype.js';
import { Diagnostic, DiagnosticError, error } from '../diagnostics.js';
import { Annotations, Graph, MultiConvSettings, Op, SERIALIZE_MODES, SerializeMode, SerializeSettings, Value, completeAttrs, inferOp } from '../graph.js';
import { Frame, Location, UNKNOWN_LOC } from '../location.js';
import { OpDef, operandCountOk } from '../opdef.js';
import { getOpDef } from '../registry.js';
import { ShapeError, TensorType, numElements, shapeLimitProblem } from '../shape.js';
import { Tensor, TensorData, allocData, castScalar } from '../tensor.js';
import { verifyGraph } from '../verify.js';
import { GraphKw, GraphName, Identifier, LEXER, MAX_TEXT_NESTING, OutputKw, RCurly, StringLit, TextIrParser, TooDeep, ValueRef, describeToken } from './grammar.js';

export { MAX_TEXT_NESTING };

let parserInstance: TextIrParser | undefined;

// ---- CST access ----

type Children = Record<string, (CstNode | IToken)[] | undefined>;

function kids(n: CstNode): Children {
  return n.children as Children;
}
function tokens(n: CstNode, key: string): IToken[] {
  return (kids(n)[key] as IToken[] | undefined) ?? [];
}
function nodes(n: CstNode, key: string): CstNode[] {
  return (kids(n)[key] as CstNode[] | undefined) ?? [];
}
function tok(n: CstNode, key: string): IToken | undefined {
  return tokens(n, key)[0];
}
function node(n: CstNode, key: string): CstNode | undefined {
  return nodes(n, key)[0];
}
function isToken(x: CstNode | IToken): x is IToken {
  return (x as IToken).image !== undefined;
}
/** The first token of a subtree (for diagnostics). */
function firstToken(n: CstNode): IToken | undefined {
  let best: IToken | undefined;
  for (const list of Object.values(kids(n))) {
    for (const x of list ?? []) {
      const t = isToken(x) ? x : firstToken(x);
      if (t && (!best || t.startOffset < best.startOffset)) best = t;
    }
  }
  return best;
}

// ---- semantic analysis ----

const ANNOTATION_KEYS = ['scope', 'block', 'ipu', 'stage', 'phase', 'recompute', 'serialize', 'matmul_pass', 'conv_pass', 'multi_conv'];

const MAX_SYNTAX_ERRORS_PER_LINE = 5;

class Analyzer {
  private readonly syntaxLines = new Map<number, number>();
  /** Syntax errors, then (when there are none) semantic errors. */
  readonly syntax: Diagnostic[] = [];
  readonly diags: Diagnostic[] = [];
  graph: Graph | undefined;
  /** The line being read (1-based) and its length. */
  line = 0;
  lineLength = 0;
  private values = new Map<string, Value>();
  private definedAt = new Map<string, string>();
  /** Values whose defining statement failed: uses are skipped without a second error. */
  private poisoned = new Set<string>();
  private outputNames = new Set<string>();
  /** Subgraphs (loop bodies) read so far at this level, for `@name` attribute values. */
  private subgraphs = new Map<string, Graph>();
  /** The enclosing graphs' names and values while a subgraph is read. */
  private readonly outer: { graph: Graph | undefined; values: Map<string, Value>; definedAt: Map<string, string>; poisoned: Set<string>; outputNames: Set<string>; subgraphs: Map<string, Graph> }[] = [];
  /** Ops with their source location: they carry their text position while being verified. */
  readonly built: { op: Op; sourceLoc: Location }[] = [];
  private readonly spans = new Map<Location, number>();

  constructor(readonly file: string) {}

  /** Where a token of the current line is (its end for the parser's end of input). */
  locOf(t: IToken | undefined): Location {
    const col = !t || t.tokenType === EOF ? this.lineLength + 1 : t.startOffset + 1;
    return { frames: [{ file: this.file, line: this.line, col }] };
  }

  report(message: string, at: IToken | undefined, notes?: readonly string[], into = this.diags): void {
    // past a few syntax errors a line's further errors only echo them (a damaged line can hold thousands)
    if (into === this.syntax) {
      const n = this.syntaxLines.get(this.line) ?? 0;
      if (n >= MAX_SYNTAX_ERRORS_PER_LINE) return;
      this.syntaxLines.set(this.line, n + 1);
    }
    const span = at && at.tokenType !== EOF ? Math.max(1, at.image.length) : 1;
    into.push({ ...error(message, this.locOf(at), notes), span });
  }

  private where(t: IToken): string {
    return `${this.file}:${this.line}:${t.startOffset + 1}`;
  }

  header(n: CstNode): void {
    const nameTok = tok(n, 'GraphName')!;
    const raw = nameTok.image.slice(1);
    this.graph = new Graph(raw.startsWith('"') ? (this.str(nameTok) ?? raw) : raw);
  }

  /** Subgraphs open (nested `graph` blocks not yet closed). */
  get nesting(): number {
    return this.outer.length;
  }

  /** A nested `graph @name {` line: the graph it opens has values of its own. */
  openSubgraph(n: CstNode): void {
    this.outer.push({ graph: this.graph, values: this.values, definedAt: this.definedAt, poisoned: this.poisoned, outputNames: this.outputNames, subgraphs: this.subgraphs });
    this.values = new Map();
    this.definedAt = new Map();
    this.poisoned = new Set();
    this.outputNames = new Set();
    this.subgraphs = new Map();
    this.header(n);
  }

  /** The `}` of a nested graph: back to the enclosing one, where `@name` now names it. */
  closeSubgraph(at: IToken): void {
    const sub = this.graph!;
    const o = this.outer.pop()!;
    Object.assign(this, { graph: o.graph, values: o.values, definedAt: o.definedAt, poisoned: o.poisoned, outputNames: o.outputNames, subgraphs: o.subgraphs });
    if (this.subgraphs.has(sub.name)) this.report(`graph @${sub.name} is defined twice here`, at);
    this.subgraphs.set(sub.name, sub);
  }

  statement(st: CstNode): void {
    const g = this.graph!;
    const out = node(st, 'outputStmt');
    if (out) this.output(g, out);
    else this.op(g, node(st, 'opStmt')!);
  }

  private str(t: IToken): string | undefined {
    const image = t.tokenType === GraphName ? t.image.slice(1) : t.image;
    try {
      return JSON.parse(image) as string;
    } catch {
      this.report(`malformed string ${image}`, t);
      return undefined;
    }
  }

  private int(t: IToken, what: string, min = -Infinity): number | undefined {
    const x = Number(t.image);
    if (!/^-?[0-9]+$/.test(t.image) || !Number.isSafeInteger(x) || x < min) {
      this.report(`${what} must be ${min === 0 ? 'a non-negative' : 'an'} integer, not ${t.image}`, t);
      return undefined;
    }
    return x;
  }

  /** The value a reference names; undefined (reported unless its definition failed) when none. */
  private use(t: IToken): Value | undefined {
    const v = this.values.get(t.image);
    if (!v && !this.poisoned.has(t.image)) this.report(`undefined value ${t.image}`, t);
    return v;
  }

  private output(g: Graph, n: CstNode): void {
    const nameTok = tok(n, 'StringLit')!;
    const name = this.str(nameTok);
    const v = this.use(tok(n, 'ValueRef')!);
    if (name === undefined) return;
    if (this.outputNames.has(name)) {
      this.report(`output ${JSON.stringify(name)} is defined twice`, nameTok);
      return;
    }
    this.outputNames.add(name);
    if (v) g.addOutput(name, v);
  }

  private op(g: Graph, n: CstNode): void {
    const before = this.diags.length;
    const kindTok = tok(n, 'kind')!;
    const kind = kindTok.image;
    const results = tokens(n, 'result');

    // result names: reject redefinitions even when the rest of the line is wrong
    const fresh: IToken[] = [];
    for (const r of results) {
      const first = this.definedAt.get(r.image);
      if (first) this.report(`value ${r.image} is defined twice`, r, [`first defined at ${first}`]);
      else {
        this.definedAt.set(r.image, this.where(r));
        fresh.push(r);
      }
    }
    const fail = () => {
      for (const r of fresh) this.poisoned.add(r.image);
    };

    const def = getOpDef(kind);
    if (!def) {
      this.report(`unknown op '${kind}'`, kindTok);
      return fail();
    }

    const operandToks = tokens(n, 'operand');
    const operands: Value[] = [];
    let operandsOk = true;
    for (const t of operandToks) {
      const v = this.use(t);
      if (v) operands.push(v);
      else operandsOk = false;
    }
    const countProblem = operandCountOk(def, operandToks.length);
    if (countProblem) this.report(`${kind}: ${countProblem}`, kindTok);

    const given: Record<string, AttrValue> = {};
    const keyTok = new Map<string, IToken>();
    for (const e of nodes(n, 'attr')) {
      const k = tok(e, 'key')!;
      if (keyTok.has(k.image)) {
        this.report(`attribute '${k.image}' is given twice`, k);
        continue;
      }
      keyTok.set(k.image, k);
      const v = this.attrValue(node(e, 'value')!);
      if (v !== undefined) given[k.image] = v;
    }

    const typeNodes = nodes(n, 'type');
    const declared: TensorType[] = [];
    for (const t of typeNodes) {
      const ty = this.type(t);
      if (ty) declared.push(ty);
    }
    if (typeNodes.length && typeNodes.length !== results.length) {
      this.report(`${kind}: ${results.length} result${results.length === 1 ? ' is' : 's are'} named but ${typeNodes.length} type${typeNodes.length === 1 ? ' is' : 's are'} given`, kindTok);
    }
    if (def.typeFromAttrs && declared.length && declared.length === typeNodes.length) {
      if (!('dtype' in given) && !keyTok.has('dtype')) given['dtype'] = declared[0]!.dtype;
      if (!('shape' in given) && !keyTok.has('shape')) given['shape'] = [...declared[0]!.shape];
    }

    const { scope, annotations } = this.annotations(nodes(n, 'annotation'));
    const sourceLoc = this.location(nodes(n, 'frame'));

    if (this.diags.length > before || !operandsOk) return fail();

    let attrs;
    try {
      attrs = completeAttrs(def, given);
    } catch (e) {
      if (!(e instanceof ShapeError)) throw e;
      const named = /attribute '([^']*)'/.exec(e.message)?.[1];
      this.report(`${kind}: ${e.message}`, (named !== undefined && keyTok.get(named)) || kindTok);
      return fail();
    }

    let types: TensorType[] = declared;
    if (!typeNodes.length) {
      try {
        types = inferOp(def, operands.map((v) => v.type), attrs);
      } catch (e) {
        if (!(e instanceof ShapeError)) throw e;
        this.report(`${kind}: ${e.message}`, kindTok);
        return fail();
      }
      if (types.length !== results.length) {
        this.report(`${kind}: gives ${types.length} result${types.length === 1 ? '' : 's'} but ${results.length} ${results.length === 1 ? 'is' : 'are'} named`, kindTok);
        return fail();
      }
      const problem = types.map((t) => shapeLimitProblem(t.shape)).find((x) => x !== undefined);
      if (problem) {
        this.report(`${kind}: ${problem}`, kindTok);
        return fail();
      }
    }

    const textLoc = this.locOf(kindTok);
    this.spans.set(textLoc, kind.length);
    const names = results.map((r) => (/^%[0-9]/.test(r.image) ? undefined : r.image.slice(1)));
    const op = g.insertOp(def, operands, attrs, { loc: textLoc, scope, annotations, names }, types);
    this.built.push({ op, sourceLoc });
    op.results.forEach((v, i) => this.values.set(results[i]!.image, v));
  }

  private annotations(entries: CstNode[]): { scope: string; annotations: Annotations } {
    let scope = '';
    const ann: { -readonly [K in keyof Annotations]: Annotations[K] } = {};
    const seen = new Set<string>();
    for (const e of entries) {
      const k = tok(e, 'key')!;
      const key = k.image;
      if (!ANNOTATION_KEYS.includes(key)) {
        this.report(`unknown annotation '${key}' (annotations: ${ANNOTATION_KEYS.join(', ')})`, k);
        continue;
      }
      if (seen.has(key)) {
        this.report(`annotation '${key}' is given twice`, k);
        continue;
      }
      seen.add(key);
      const vn = node(e, 'value')!;
      const s = tok(vn, 'StringLit');
      const num = tok(vn, 'NumberLit');
      const word = tok(vn, 'Word');
      const at = firstToken(vn);
      if (key === 'scope' || key === 'block') {
        const v = s ? this.str(s) : undefined;
        if (!s) this.report(`annotation '${key}' must be a string`, at);
        else if (v !== undefined) {
          if (key === 'scope') scope = v;
          else ann.block = v;
        }
      } else if (key === 'recompute') {
        const v = word && !node(vn, 'angleBody') ? word.image : s ? this.str(s) : undefined;
        if (v === 'checkpoint' || v === 'recompute') ann.recompute = v;
        else this.report(`annotation 'recompute' must be checkpoint or recompute`, at);
      } else if (key === 'serialize') {
        const v = this.serialize(vn);
        if (v) ann.serialize = v;
      } else if (key === 'matmul_pass') {
        const v = word && !node(vn, 'angleBody') ? word.image : undefined;
        if (v === 'bwd_lhs' || v === 'bwd_rhs') ann.matmulPass = v;
        else this.report(`annotation 'matmul_pass' must be bwd_lhs or bwd_rhs`, at);
      } else if (key === 'multi_conv') {
        const v = this.multiConv(vn);
        if (v) ann.multiConv = v;
      } else if (key === 'conv_pass') {
        const v = word && !node(vn, 'angleBody') ? word.image : undefined;
        if (v === 'bwd') ann.convPass = v;
        else this.report(`annotation 'conv_pass' must be bwd`, at);
      } else {
        const v = num ? this.int(num, `annotation '${key}'`) : undefined;
        if (!num) this.report(`annotation '${key}' must be an integer`, at);
        else if (v !== undefined) ann[key as 'ipu' | 'stage' | 'phase'] = v;
      }
    }
    return { scope, annotations: ann };
  }

  /** The `key = value` entries of an annotation's `<...>`, each key once (else reported: undefined). */
  private angleEntries(body: CstNode, what: string): { k: IToken; v: CstNode; word?: string; num?: IToken }[] | undefined {
    const out: { k: IToken; v: CstNode; word?: string; num?: IToken }[] = [];
    const seen = new Set<string>();
    for (const e of nodes(body, 'entry')) {
      const k = tok(e, 'key')!;
      const v = node(e, 'value')!;
      if (seen.has(k.image)) {
        this.report(`${what}: '${k.image}' is given twice`, k);
        return undefined;
      }
      seen.add(k.image);
      const word = node(v, 'angleBody') ? undefined : tok(v, 'Word')?.image;
      const num = tok(v, 'NumberLit');
      out.push({ k, v, ...(word !== undefined ? { word } : {}), ...(num ? { num } : {}) });
    }
    return out;
  }

  /** `mode<factor = n, keep_precision = true|false, grad = lhs|rhs>` (see the printer). */
  private serialize(vn: CstNode): SerializeSettings | undefined {
    const modeTok = tok(vn, 'Word');
    const body = node(vn, 'angleBody');
    const form = `serialize = ${SERIALIZE_MODES.join('|')}<factor = n, keep_precision = true|false, grad = lhs|rhs>`;
    if (!modeTok || !body || node(body, 'type') || !(SERIALIZE_MODES as readonly string[]).includes(modeTok.image)) {
      this.report(`annotation 'serialize' must be written ${form}`, firstToken(vn));
      return undefined;
    }
    let factor: number | undefined;
    let keepPrecision = false;
    let grad: 'lhs' | 'rhs' | undefined;
    const entries = this.angleEntries(body, 'serialize');
    if (!entries) return undefined;
    for (const { k, v, word, num } of entries) {
      if (k.image === 'factor') {
        const x = num ? Number(num.image) : NaN;
        if (!num || !/^[0-9]+$/.test(num.image) || !Number.isSafeInteger(x) || x < 1) {
          this.report(`serialize: factor must be a positive integer`, firstToken(v));
          return undefined;
        }
        factor = x;
      } else if (k.image === 'keep_precision' && (word === 'true' || word === 'false')) {
        keepPrecision = word === 'true';
      } else if (k.image === 'grad' && (word === 'lhs' || word === 'rhs')) {
        grad = word;
      } else {
        this.report(`serialize: unexpected '${k.image}' (${form})`, k);
        return undefined;
      }
    }
    if (factor === undefined) {
      this.report(`serialize: the factor is missing (${form})`, modeTok);
      return undefined;
    }
    return { mode: modeTok.image as SerializeMode, factor, keepPrecision, ...(grad ? { grad } : {}) };
  }

  /** `group<id = n, available_memory_proportion = p, partials_type = float|half, ...>` (see the printer). */
  private multiConv(vn: CstNode): MultiConvSettings | undefined {
    const body = node(vn, 'angleBody');
    const form = 'multi_conv = group<id = n, available_memory_proportion = p, partials_type = float|half, enable_conv_dithering = true|false, plan_type = parallel|serial, per_conv_reserved_tiles = n, cycle_back_off = p>';
    if (tok(vn, 'Word')?.image !== 'group' || !body || node(body, 'type')) {
      this.report(`annotation 'multi_conv' must be written ${form}`, firstToken(vn));
      return undefined;
    }
    const m: { -readonly [K in keyof MultiConvSettings]: MultiConvSettings[K] } = { group: -1 };
    const entries = this.angleEntries(body, 'multi_conv');
    if (!entries) return undefined;
    for (const { k, word, num } of entries) {
      const x = num ? Number(num.image) : NaN;
      const count = num !== undefined && /^[0-9]+$/.test(num.image) && Number.isSafeInteger(x) ? x : undefined;
      const proportion = x >= 0 && x <= 1 ? x : undefined;
      if (k.image === 'id' && count !== undefined) m.group = count;
      else if (k.image === 'available_memory_proportion' && proportion !== undefined) m.availableMemoryProportion = proportion;
      else if (k.image === 'partials_type' && (word === 'float' || word === 'half')) m.partialsType = word;
      else if (k.image === 'enable_conv_dithering' && (word === 'true' || word === 'false')) m.enableConvDithering = word === 'true';
      else if (k.image === 'plan_type' && (word === 'parallel' || word === 'serial')) m.planType = word;
      else if (k.image === 'per_conv_reserved_tiles' && count !== undefined && count > 0) m.perConvReservedTiles = count;
      else if (k.image === 'cycle_back_off' && proportion !== undefined) m.cycleBackOff = proportion;
      else {
        this.report(`multi_conv: unexpected '${k.image}' or bad value (${form})`, k);
        return undefined;
      }
    }
    if (m.group < 0) {
      this.report(`multi_conv: the id is missing (${form})`, firstToken(vn));
      return undefined;
    }
    return m;
  }

  private location(frames: CstNode[]): Location {
    if (!frames.length) return UNKNOWN_LOC;
    const out: Frame[] = [];
    for (const f of frames) {
      const file = this.str(tok(f, 'file')!);
      const lineTok = tok(f, 'line');
      const colTok = tok(f, 'col');
      const nameTok = tok(f, 'name');
      const fnTok = tok(f, 'fn');
      const frame: { -readonly [K in keyof Frame]: Frame[K] } = { file: file ?? '' };
      if (lineTok) frame.line = this.int(lineTok, 'a line number');
      if (colTok) frame.col = this.int(colTok, 'a column number');
      if (nameTok) frame.name = this.str(nameTok);
      if (fnTok) frame.fn = fnTok.tokenType === StringLit ? this.str(fnTok) : fnTok.image;
      out.push(frame);
    }
    return { frames: out };
  }

  private type(n: CstNode): TensorType | undefined {
    const dt = tok(n, 'dtype')!;
    const dtype = parseDType(dt.image);
    if (!dtype) this.report(`unknown dtype '${dt.image}' (dtypes: ${DTYPES.map(dtypeShortName).join(', ')})`, dt);
    const shape: number[] = [];
    let ok = dtype !== undefined;
    for (const d of tokens(n, 'dim')) {
      // the limit's own message for any number, as the model language and ONNX import give it
      const x = Number(d.image);
      const problem = Number.isNaN(x) ? undefined : shapeLimitProblem([x]);
      if (Number.isNaN(x)) this.int(d, 'a dimension', 0);
      else if (problem) this.report(problem, d);
      if (Number.isNaN(x) || problem) ok = false;
      else shape.push(x);
    }
    const problem = ok ? shapeLimitProblem(shape) : undefined;
    if (problem) {
      this.report(problem, firstToken(n));
      ok = false;
    }
    return ok ? { dtype: dtype!, shape } : undefined;
  }

  /** A number written as a literal or as inf / nan. */
  private number(vn: CstNode): number | undefined {
    const num = tok(vn, 'NumberLit');
    if (num) return num.image === '-inf' ? -Infinity : Number(num.image);
    const w = tok(vn, 'Word');
    if (w && !node(vn, 'angleBody')) {
      if (w.image === 'inf') return Infinity;
      if (w.image === 'nan') return NaN;
    }
    return undefined;
  }

  private attrValue(vn: CstNode): AttrValue | undefined {
    const x = this.number(vn);
    if (x !== undefined) return x;
    const s = tok(vn, 'StringLit');
    if (s) return this.str(s);
    const list = node(vn, 'list');
    if (list) {
      const items: number[] = [];
      for (const item of nodes(list, 'item')) {
        const v = this.number(item);
        if (v === undefined) {
          this.report(`list elements must be numbers`, firstToken(item));
          return undefined;
        }
        items.push(v);
      }
      return items;
    }
    const gn = tok(vn, 'GraphName');
    if (gn) {
      const raw = gn.image.slice(1);
      const name = raw.startsWith('"') ? this.str(gn) : raw;
      const sub = name === undefined ? undefined : this.subgraphs.get(name);
      if (name !== undefined && !sub) this.report(`no graph ${gn.image} is defined before this op (a subgraph is written just before the op that uses it)`, gn);
      return sub;
    }
    const w = tok(vn, 'Word')!;
    const body = node(vn, 'angleBody');
    if (body) return w.image === 'dense' ? this.tensor(w, body) : this.initSpec(w, body);
    if (w.image === 'true') return true;
    if (w.image === 'false') return false;
    const dt = parseDType(w.image);
    if (dt) return dt;
    this.report(`unknown value '${w.image}' (strings are written in double quotes)`, w);
    return undefined;
  }

  private initSpec(fnTok: IToken, body: CstNode): InitSpec | undefined {
    if (node(body, 'type')) {
      this.report(`'${fnTok.image}<...>' takes key = value arguments (tensors are written dense<type, values>)`, fnTok);
      return undefined;
    }
    const args: Record<string, number> = {};
    for (const e of nodes(body, 'entry')) {
      const k = tok(e, 'key')!;
      const v = this.number(node(e, 'value')!);
      if (v === undefined) {
        this.report(`initializer argument '${k.image}' must be a number`, firstToken(node(e, 'value')!));
        return undefined;
      }
      args[k.image] = v;
    }
    return { kind: 'init', fn: fnTok.image, args };
  }

  private tensor(at: IToken, body: CstNode): Tensor | undefined {
    const tn = node(body, 'type');
    if (!tn) {
      this.report(`dense<...> needs a type and values: dense<f32[2], [1.0, 2.0]>`, at);
      return undefined;
    }
    const ty = this.type(tn);
    if (!ty) return undefined;
    const n = numElements(ty.shape);
    // the values are counted before any memory is taken: a short line cannot ask for gigabytes
    const alloc = (): TensorData | undefined => {
      try {
        return allocData(ty.dtype, n);
      } catch (e) {
        if (!(e instanceof ShapeError)) throw e;
        this.report(e.message, firstToken(tn));
        return undefined;
      }
    };
    let data: TensorData | undefined;
    const payload = node(body, 'payload')!;
    const hexTok = tok(payload, 'StringLit');
    const list = node(payload, 'list');
    if (hexTok) {
      const hex = this.str(hexTok);
      if (hex === undefined) return undefined;
      const width = dtypeByteSize(ty.dtype);
      if (!/^0x([0-9a-fA-F]{2})*$/.test(hex) || hex.length !== 2 + 2 * width * n) {
        this.report(`expected "0x" and ${width * n} hex bytes for ${n} element${n === 1 ? '' : 's'}`, hexTok);
        return undefined;
      }
      data = alloc();
      if (!data) return undefined;
      decodeHex(hex, ty.dtype, data);
    } else if (list) {
      const items = nodes(list, 'item');
      if (items.length !== n) {
        this.report(`${items.length} value${items.length === 1 ? '' : 's'} given for ${n} element${n === 1 ? '' : 's'}`, firstToken(payload));
        return undefined;
      }
      data = alloc();
      if (!data) return undefined;
      for (let i = 0; i < n; i++) {
        const v = this.element(items[i]!, ty.dtype);
        if (v === undefined) return undefined;
        data[i] = v;
      }
    } else {
      this.report(`tensor values must be a list or a hex string`, firstToken(payload));
      return undefined;
    }
    return new Tensor(ty.dtype, ty.shape, data);
  }

  private element(item: CstNode, dtype: DType): number | undefined {
    const w = tok(item, 'Word');
    if (dtype === 'bool') {
      if (w && !node(item, 'angleBody') && (w.image === 'true' || w.image === 'false')) return w.image === 'true' ? 1 : 0;
      this.report(`bool elements are true or false`, firstToken(item));
      return undefined;
    }
    const x = this.number(item);
    if (x === undefined) {
      this.report(`tensor elements must be numbers`, firstToken(item));
      return undefined;
    }
    if (isInteger(dtype)) {
      const [lo, hi] = integerRange(dtype);
      if (!Number.isInteger(x) || x < lo || x > hi) {
        this.report(`element ${x} does not fit ${dtypeShortName(dtype)}`, firstToken(item));
        return undefined;
      }
      return x;
    }
    return castScalar(dtype, x);
  }

  /** Runs the verifier with text positions on the ops, then gives the ops their source locations. */
  verify(g: Graph): void {
    for (const d of verifyGraph(g)) {
      const span = d.loc ? this.spans.get(d.loc) : undefined;
      this.diags.push(span !== undefined ? { ...d, span } : d);
    }
    for (const b of this.built) b.op.loc = b.sourceLoc;
  }
}

function decodeHex(hex: string, dtype: DType, data: TensorData): void {
  const byte = (i: number) => parseInt(hex.substr(2 + 2 * i, 2), 16);
  const n = data.length;
  if (dtype === 'bool') {
    for (let i = 0; i < n; i++) data[i] = byte(i);
  } else if (dtype === 'float64') {
    // little-endian host: file order is memory order
    const bytes = new Uint8Array(data.buffer, data.byteOffset, 8 * n);
    for (let i = 0; i < bytes.length; i++) bytes[i] = byte(i);
  } else if (dtype === 'float16') {
    for (let i = 0; i < n; i++) data[i] = halfBitsToFloat(byte(2 * i) | (byte(2 * i + 1) << 8));
  } else if (isNarrowInt(dtype) || isLowFloat(dtype)) {
    const width = dtypeByteSize(dtype);
    for (let i = 0; i < n; i++) data[i] = narrowElementFromBits(dtype, width === 1 ? byte(i) : byte(2 * i) | (byte(2 * i + 1) << 8));
  } else {
    // copy bits, not values, so float32 NaN payloads survive
    const bits = new Uint32Array(data.buffer, data.byteOffset, n);
    for (let i = 0; i < n; i++) bits[i] = (byte(4 * i) | (byte(4 * i + 1) << 8) | (byte(4 * i + 2) << 16) | (byte(4 * i + 3) << 24)) >>> 0;
  }
}

function lexerMessage(e: ILexingError, line: string): string {
  const bad = line.substr(e.offset, e.length);
  if (bad.startsWith('"')) return 'unterminated string';
  return `unexpected character${e.length > 1 ? 's' : ''} ${JSON.stringify(bad)}`;
}

function sortByPosition(ds: Diagnostic[]): Diagnostic[] {
  const key = (d: Diagnostic) => {
    const f = d.loc?.frames[0];
    return [f?.line ?? Infinity, f?.col ?? Infinity] as const;
  };
  return ds
    .map((d, i) => ({ d, i, k: key(d) }))
    .sort((a, b) => a.k[0] - b.k[0] || a.k[1] - b.k[1] || a.i - b.i)
    .map((x) => x.d);
}

/** Runs one rule over the tokens of one line; syntax errors go to `a.syntax`. */
function parseLine<T>(a: Analyzer, tokens: IToken[], rule: (p: TextIrParser) => T): T | undefined {
  parserInstance ??= new TextIrParser();
  const parser = parserInstance;
  parser.input = tokens;
  parser.depth = 0;
  let cst: T;
  try {
    cst = rule(parser);
  } catch (e) {
    if (!(e instanceof TooDeep)) throw e;
    parser.input = [];
    a.report(`values nest more than ${MAX_TEXT_NESTING} levels deep on this line`, e.token, undefined, a.syntax);
    return undefined;
  }
  for (const e of parser.errors as IRecognitionException[]) a.report(e.message, e.token, undefined, a.syntax);
  parser.input = []; // the parser is reused: keep no tokens alive
  return cst;
}

/**
 * Parses the text form of a graph. Throws DiagnosticError listing every syntax error, or, when
 * the syntax is right, every semantic error (including the verifier's), each at its token in
 * `file`.
 */
export function parseGraph(text: string, file = '<text>'): Graph {
  const a = new Analyzer(file);
  let state: 'before' | 'body' | 'after' | 'ignored' = 'before';
  let lineNo = 0;
  let lastLine = 1;
  let headerFailed = false;
  let lastLength = 0;
  for (let start = 0; start <= text.length; ) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    a.line = ++lineNo;
    a.lineLength = line.length;
    const lexed = LEXER.tokenize(line);
    for (const e of lexed.errors) {
      const at = { image: line.substr(e.offset, e.length), startOffset: e.offset } as IToken;
      a.report(lexerMessage(e, line), at, undefined, a.syntax);
    }
    const tokens = lexed.tokens;
    if (!tokens.length) continue;
    lastLine = lineNo;
    lastLength = line.length;
    const first = tokens[0]!;
    switch (state) {
      case 'before': {
        const before = a.syntax.length;
        const cst = parseLine(a, tokens, (p) => p.header());
        if (!a.syntax.length && cst) a.header(cst);
        headerFailed = a.syntax.length > before;
        state = 'body';
        break;
      }
      case 'body': {
        if (first.tokenType === RCurly) {
          parseLine(a, tokens, (p) => p.footer());
          if (a.nesting > 0) a.closeSubgraph(first);
          else state = 'after';
        } else if (first.tokenType === GraphKw) {
          const before = a.syntax.length;
          const cst = parseLine(a, tokens, (p) => p.header());
          if (a.syntax.length > before || !cst) state = 'ignored';
          else a.openSubgraph(cst);
        } else if (first.tokenType === ValueRef || first.tokenType === Identifier || first.tokenType === OutputKw) {
          const cst = parseLine(a, tokens, (p) => p.statement());
          if (!a.syntax.length && cst) a.statement(cst);
        } else {
          a.report(`expected an op, an output or '}' but found ${describeToken(first)}`, first, undefined, a.syntax);
        }
        break;
      }
      case 'after':
        if (first.tokenType === GraphKw) a.report('a file holds one graph; this is a second one', first, undefined, a.syntax);
        else a.report(`expected the end of the text but found ${describeToken(first)}`, first, undefined, a.syntax);
        state = 'ignored';
        break;
      case 'ignored':
        break;
    }
  }
  if (state === 'before' || (state === 'body' && !headerFailed)) {
    // the end of the text: just after the last non-blank line
    a.line = lastLine;
    a.lineLength = lastLength;
    const want = state === 'before' ? "'graph'" : "an op, an output or '}'";
    a.report(`expected ${want} but found the end of the text`, undefined, undefined, a.syntax);
  }
  if (a.syntax.length) throw new DiagnosticError(sortByPosition(a.syntax));
  const g = a.graph!;
  a.verify(g);
  if (a.diags.length) throw new DiagnosticError(sortByPosition(a.diags));
  return g;
}
