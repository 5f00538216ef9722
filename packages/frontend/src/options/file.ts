/** The options-file parser: literals, enum members, the option classes and setter calls; no eval. */
import { editDistance } from '@tilegraph/ir';
import { MAX_NESTING } from '../dsl/parser.js';
import { OptionsError } from './checks.js';
import { FILE_ENUMS, PartialsType } from './enums.js';
import { ParallelPhasedExecution, Phase, PhaseArg, PipelinedExecution, SerialPhasedExecution, ShardedExecution, Stage } from './execution.js';
import { TensorLocationSettings } from './locations.js';
import { DistributedOptions, LOCATION_SETTERS, PopartOptions, PrecisionOptions, TensorLocationOptions, TrainingOptions } from './groups.js';
import { Options, PRECISION_SETTERS, SUB_OBJECTS, TRAINING_SETTERS } from './options.js';

type Tok =
  | { k: 'id'; s: string; col: number }
  | { k: 'num'; n: number; col: number }
  | { k: 'str'; s: string; col: number }
  | { k: 'p'; s: string; col: number }
  | { k: 'end'; col: number };

function tokenize(line: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  while (i < line.length) {
    const c = line[i]!;
    const col = i + 1;
    if (c === ' ' || c === '\t') {
      i++;
    } else if (c === '#') {
      break;
    } else if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < line.length && /[A-Za-z0-9_]/.test(line[j]!)) j++;
      toks.push({ k: 'id', s: line.slice(i, j), col });
      i = j;
    } else if (/[0-9]/.test(c) || ((c === '-' || c === '+' || c === '.') && /[0-9.]/.test(line[i + 1] ?? ''))) {
      const m = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(line.slice(i));
      if (m === null) throw new OptionsError(`bad number at column ${col}`);
      toks.push({ k: 'num', n: Number(m[0]), col });
      i += m[0].length;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      let s = '';
      for (;;) {
        if (j >= line.length) throw new OptionsError(`unterminated string starting at column ${col}`);
        const d = line[j]!;
        if (d === c) break;
        if (d === '\\') {
          const e = line[j + 1];
          const simple: Record<string, string> = {
            ...{ n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', '0': '\0' },
            ...{ '\\': '\\', '"': '"', "'": "'" },
          };
          if (e !== undefined && e in simple) {
            s += simple[e];
            j += 2;
          } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(line.slice(j + 2, j + 6))) {
            s += String.fromCharCode(parseInt(line.slice(j + 2, j + 6), 16));
            j += 6;
          } else if (e === 'x' && /^[0-9a-fA-F]{2}$/.test(line.slice(j + 2, j + 4))) {
            s += String.fromCharCode(parseInt(line.slice(j + 2, j + 4), 16));
            j += 4;
          } else {
            throw new OptionsError(`bad escape in string at column ${j + 1}`);
          }
        } else {
          s += d;
          j++;
        }
      }
      toks.push({ k: 'str', s, col });
      i = j + 1;
    } else if ('.()[]{},:='.includes(c)) {
      toks.push({ k: 'p', s: c, col });
      i++;
    } else {
      throw new OptionsError(`unexpected character ${JSON.stringify(c)} at column ${col}`);
    }
  }
  toks.push({ k: 'end', col: line.length + 1 });
  return toks;
}

/** A name or a call in a dotted chain: `Training.gradientAccumulation(2)`. */
type Seg = { name: string; col: number; args?: Expr[] };
type Expr =
  | { k: 'lit'; v: unknown }
  | { k: 'list'; items: Expr[] }
  | { k: 'dict'; entries: [string, Expr][] }
  | { k: 'chain'; segs: Seg[] };

class LineParser {
  private i = 0;
  /** Brackets, parentheses and braces open at the current token. */
  private depth = 0;
  constructor(private readonly toks: Tok[]) {}

  /**
   * Opens one level at the bracket just read (token i-1). The parser and evalExpr recurse once per
   * level: past MAX_NESTING (the model language's limit) the line is refused, not the stack overflowed.
   */
  private enter(): void {
    if (++this.depth > MAX_NESTING) {
      const e = new OptionsError(`this nests more than ${MAX_NESTING} levels deep (brackets, parentheses, braces and calls count); write the value flatter`);
      e.col = this.toks[this.i - 1]!.col;
      throw e;
    }
  }

  private peek(): Tok {
    return this.toks[this.i]!;
  }
  private isP(s: string): boolean {
    const t = this.peek();
    return t.k === 'p' && t.s === s;
  }
  private expectP(s: string): void {
    if (!this.isP(s)) throw new OptionsError(`expected '${s}' ${this.where()}`);
    this.i++;
  }
  private where(): string {
    const t = this.peek();
    if (t.k === 'end') return 'at the end of the line';
    const text = t.k === 'id' || t.k === 'p' ? t.s : t.k === 'num' ? String(t.n) : JSON.stringify(t.s);
    return `at column ${t.col} (found ${text})`;
  }

  statement(): Seg[] {
    const segs = this.chain();
    if (this.peek().k !== 'end') throw new OptionsError(`unexpected text ${this.where()}; write one setter call per line`);
    return segs;
  }

  private chain(): Seg[] {
    const segs: Seg[] = [];
    for (;;) {
      const t = this.peek();
      if (t.k !== 'id') throw new OptionsError(`expected a name ${this.where()}`);
      this.i++;
      const seg: Seg = { name: t.s, col: t.col };
      if (this.isP('(')) {
        this.i++;
        seg.args = this.items(')');
      }
      segs.push(seg);
      if (!this.isP('.')) return segs;
      this.i++;
    }
  }

  private items(close: string): Expr[] {
    this.enter();
    const out: Expr[] = [];
    while (!this.isP(close)) {
      const t = this.peek();
      const next = this.toks[this.i + 1];
      if (t.k === 'id' && next !== undefined && next.k === 'p' && next.s === '=') {
        throw new OptionsError(`keyword argument '${t.s}=' at column ${t.col} is not supported; pass arguments by position`);
      }
      out.push(this.expr());
      if (this.isP(',')) this.i++;
      else if (!this.isP(close)) throw new OptionsError(`expected ',' or '${close}' ${this.where()}`);
    }
    this.i++;
    this.depth--;
    return out;
  }

  expr(): Expr {
    const t = this.peek();
    if (t.k === 'num') {
      this.i++;
      return { k: 'lit', v: t.n };
    }
    if (t.k === 'str') {
      this.i++;
      return { k: 'lit', v: t.s };
    }
    if (t.k === 'p' && t.s === '[') {
      this.i++;
      return { k: 'list', items: this.items(']') };
    }
    if (t.k === 'p' && t.s === '(') {
      this.i++;
      const items = this.items(')');
      return items.length === 1 ? items[0]! : { k: 'list', items };
    }
    if (t.k === 'p' && t.s === '{') {
      this.i++;
      this.enter();
      const entries: [string, Expr][] = [];
      while (!this.isP('}')) {
        const key = this.peek();
        if (key.k !== 'str') throw new OptionsError(`dictionary keys must be strings such as "IPU0" ${this.where()}`);
        this.i++;
        this.expectP(':');
        entries.push([key.s, this.expr()]);
        if (this.isP(',')) this.i++;
        else if (!this.isP('}')) throw new OptionsError(`expected ',' or '}' ${this.where()}`);
      }
      this.i++;
      this.depth--;
      return { k: 'dict', entries };
    }
    if (t.k === 'id') return { k: 'chain', segs: this.chain() };
    throw new OptionsError(`expected a value ${this.where()}`);
  }
}

const CONSTANTS: Record<string, unknown> = { True: true, False: false, None: null, true: true, false: false, null: null };
const TORCH_DTYPES: Record<string, PartialsType> = { float: 'float32', float32: 'float32', half: 'float16', float16: 'float16' };

/** Classes an options file may construct, and the methods it may call on them. */
const FILE_CLASSES: Record<string, (args: unknown[]) => object> = {
  TensorLocationSettings: (a) => {
    if (a.length > 0) throw new OptionsError('TensorLocationSettings() takes no arguments');
    return new TensorLocationSettings();
  },
  Stage: (a) => new Stage(...(a as string[])),
  Phase: (a) => new Phase(...(a as (Stage | string)[])),
  PipelinedExecution: (a) => new PipelinedExecution(...(a as string[])),
  ShardedExecution: (a) => new ShardedExecution(...(a as string[])),
  SerialPhasedExecution: (a) => new SerialPhasedExecution(...(a as PhaseArg[])),
  ParallelPhasedExecution: (a) => new ParallelPhasedExecution(...(a as PhaseArg[])),
};

const OPTIONS_SETTERS = [
  'deviceIterations', 'replicationFactor', 'inputReplicaGrouping', 'outputMode', 'anchorTensor',
  'sourceLocationExcludes', 'appendToLocationExcludes', 'randomSeed', 'enableExecutableCaching',
  'executableTimeout', 'enableSyntheticData', 'connectionType', 'useIpuModel', 'useOfflineIpuTarget', 'useIpuId',
  'autoRoundNumIPUs', 'setAvailableMemoryProportion', 'syncPattern', 'broadcastBuffers', 'modelName',
  'logDir', 'maxRepeatLogs', 'logCycleCount', 'enableProfiling', 'showCompilationProgressBar', 'setExecutionStrategy',
  'enableStableNorm', 'disableModuleNamescope', 'relaxOptimizerAttributesChecks',
];

function fileMethods(obj: object): readonly string[] {
  if (obj instanceof Options) return OPTIONS_SETTERS;
  if (obj instanceof TrainingOptions) return Object.values(TRAINING_SETTERS);
  if (obj instanceof PrecisionOptions) return Object.values(PRECISION_SETTERS);
  if (obj instanceof TensorLocationOptions) return [...Object.values(LOCATION_SETTERS), 'numIOTiles'];
  if (obj instanceof DistributedOptions) return ['configureProcessId', 'setEnvVarNames', 'disable'];
  if (obj instanceof PopartOptions) return ['set'];
  if (obj instanceof TensorLocationSettings) {
    return [
      'useOnChipStorage',
      'useReplicatedTensorSharding',
      'minElementsForOffChip',
      'minElementsForReplicatedTensorSharding',
      'useIOTilesToLoad',
      'useIOTilesToStore',
    ];
  }
  if (obj instanceof Stage) return ['ipu'];
  if (obj instanceof Phase) return ['ipus'];
  if (obj instanceof PipelinedExecution) return ['setPipelineSchedule'];
  if (obj instanceof SerialPhasedExecution) return ['useSeparateBackwardPhase', 'setTensorsLiveness'];
  if (obj instanceof ParallelPhasedExecution) return ['useSeparateBackwardPhase', 'sendTensorsOffChipAfterFwd'];
  return [];
}


function unknownName(name: string, candidates: readonly string[], what: string): OptionsError {
  const best = candidates
    .map((c) => ({ c, d: editDistance(name, c, true) }))
    .filter((x) => x.d <= Math.max(2, Math.floor(name.length / 3)))
    .sort((x, y) => x.d - y.d)[0];
  return new OptionsError(`unknown ${what} '${name}'${best ? `; did you mean '${best.c}'?` : ''}`);
}

function typeName(obj: object): string {
  if (obj instanceof Options) return 'Options';
  if (obj instanceof TrainingOptions) return 'Training';
  if (obj instanceof PrecisionOptions) return 'Precision';
  if (obj instanceof TensorLocationOptions) return 'TensorLocations';
  if (obj instanceof DistributedOptions) return 'Distributed';
  if (obj instanceof PopartOptions) return '_Popart';
  return obj.constructor.name;
}

/** Apply method-call segments to `target`; each must be a call of a method the file may use. */
function callChain(target: object, segs: Seg[]): object {
  let cur = target;
  for (const seg of segs) {
    const methods = fileMethods(cur);
    if (!methods.includes(seg.name)) throw unknownName(seg.name, methods, `${typeName(cur)} setter`);
    if (seg.args === undefined) {
      throw new OptionsError(`'${seg.name}' is a setter; call it with its arguments, e.g. ${seg.name}(...)`);
    }
    const args = seg.args.map(evalExpr);
    const fn = (cur as Record<string, (...a: unknown[]) => object>)[seg.name]!;
    cur = fn.apply(cur, args);
  }
  return cur;
}

function evalExpr(e: Expr): unknown {
  if (e.k === 'lit') return e.v;
  if (e.k === 'list') return e.items.map(evalExpr);
  if (e.k === 'dict') return Object.fromEntries(e.entries.map(([k, v]) => [k, evalExpr(v)]));
  let segs = e.segs;
  if (segs.length > 1 && (segs[0]!.name === 'poptorch' || segs[0]!.name === 'tilegraph') && segs[0]!.args === undefined) {
    segs = segs.slice(1);
  }
  const head = segs[0]!;
  if (head.args === undefined && segs.length === 1 && head.name in CONSTANTS) return CONSTANTS[head.name];
  if (head.name === 'torch' && head.args === undefined && segs.length === 2 && segs[1]!.args === undefined) {
    const dt = TORCH_DTYPES[segs[1]!.name];
    if (dt === undefined) {
      throw new OptionsError(`unsupported dtype torch.${segs[1]!.name}; expected torch.float32 or torch.float16`);
    }
    return dt;
  }
  const en = FILE_ENUMS[head.name];
  if (en !== undefined && head.args === undefined) {
    const member = segs[1];
    if (segs.length !== 2 || member!.args !== undefined) throw new OptionsError(`expected ${head.name}.<member>`);
    const v = en[member!.name];
    if (v === undefined) throw unknownName(member!.name, Object.keys(en), `${head.name} member`);
    return v;
  }
  const make = FILE_CLASSES[head.name];
  if (make !== undefined) {
    if (head.args === undefined) throw new OptionsError(`${head.name} must be called, e.g. ${head.name}()`);
    return callChain(make(head.args.map(evalExpr)), segs.slice(1));
  }
  throw unknownName(
    segs.map((s) => s.name).join('.'),
    [...Object.keys(FILE_ENUMS), ...Object.keys(FILE_CLASSES), 'True', 'False', 'None'],
    'name',
  );
}

/** Run one line of an options file against `opts`. */
export function runOptionsLine(opts: Options, line: string): void {
  const toks = tokenize(line);
  if (toks.length === 1) return; // blank or comment
  const segs = new LineParser(toks).statement();
  const head = segs[0]!;
  if (head.name === 'options' && head.args === undefined && segs.length > 1) {
    throw new OptionsError("omit the 'options.' prefix: write e.g. deviceIterations(4)");
  }
  let target: object = opts;
  let rest = segs;
  if ((SUB_OBJECTS as readonly string[]).includes(head.name) && head.args === undefined) {
    target = (opts as unknown as Record<string, object>)[head.name]!;
    rest = segs.slice(1);
    if (rest.length === 0) {
      const example = `${head.name}.${fileMethods(target)[0]}(...)`;
      throw new OptionsError(`'${head.name}' alone sets nothing; call one of its setters, e.g. ${example}`);
    }
  } else if (!OPTIONS_SETTERS.includes(head.name)) {
    throw unknownName(head.name, [...OPTIONS_SETTERS, ...SUB_OBJECTS], 'option');
  }
  callChain(target, rest);
}
