import { Attrs, InitSpec } from './attributes.js';
import { Diagnostic, error } from './diagnostics.js';
import { Graph } from './graph.js';
import { TensorType, formatType, typesEqual } from './shape.js';
import { Tensor } from './tensor.js';
import { printGraph } from './text/index.js';

/**
 * The control level of the IR, mirroring poplar::program: what runs, how often, and how data
 * moves between host, replicas and graphs. Graphs communicate only through named state
 * (parameters and variables), host streams and collectives.
 */
export type ProgramNode =
  | { readonly kind: 'sequence'; readonly body: readonly ProgramNode[] }
  | { readonly kind: 'repeat'; readonly count: number; readonly body: ProgramNode }
  /** Runs one graph of the module: reads streams and state, writes state and output streams. */
  | { readonly kind: 'execute'; readonly graph: string }
  /** Host → device: every replica takes its next micro-batch of each named input stream. */
  | { readonly kind: 'stream_in'; readonly inputs: readonly string[] }
  /** Cross-replica reduction of variables, each within its replica group. */
  | { readonly kind: 'all_reduce'; readonly variables: readonly string[]; readonly op: 'sum' | 'mean' };

export const seq = (...body: ProgramNode[]): ProgramNode => ({ kind: 'sequence', body });
export const repeat = (count: number, body: ProgramNode): ProgramNode => ({ kind: 'repeat', count, body });
export const execute = (graph: string): ProgramNode => ({ kind: 'execute', graph });
export const streamIn = (inputs: readonly string[]): ProgramNode => ({ kind: 'stream_in', inputs });
export const allReduce = (variables: readonly string[], op: 'sum' | 'mean'): ProgramNode => ({ kind: 'all_reduce', variables, op });

/** PopART's replica grouping kinds. */
export type CommGroupType = 'all' | 'consecutive' | 'orthogonal' | 'none';

export interface CommGroup {
  readonly type: CommGroupType;
  /** Replicas per group (ignored for 'all' and 'none'). */
  readonly size: number;
}

export type VariableRetrievalMode = 'one_per_group' | 'all_replicas';

export interface VariableInfo {
  readonly name: string;
  readonly type: TensorType;
  /** 'weight' for parameters; the variable op's role otherwise. */
  readonly role: string;
  readonly init: Tensor | InitSpec;
  /** Replicas that share this variable (weights: the gradient all-reduce group). Default: all. */
  group?: CommGroup;
  retrieval?: VariableRetrievalMode;
}

/** A compiled step: graphs, the program that runs them, and the state they share. */
export interface Module {
  readonly name: string;
  readonly graphs: ReadonlyMap<string, Graph>;
  readonly program: ProgramNode;
  readonly replicationFactor: number;
  readonly variables: ReadonlyMap<string, VariableInfo>;
}

/** Collects the parameters and variables of all graphs; reports conflicting declarations. */
export function collectVariables(graphs: ReadonlyMap<string, Graph>, diagnostics: Diagnostic[] = []): Map<string, VariableInfo> {
  const out = new Map<string, VariableInfo>();
  for (const g of graphs.values()) {
    for (const op of g.ops) {
      if (op.kind !== 'parameter' && op.kind !== 'variable') continue;
      const a: Attrs = op.attrs;
      const name = a['name'] as string;
      const info: VariableInfo = {
        name,
        type: op.result.type,
        role: op.kind === 'parameter' ? 'weight' : (a['role'] as string),
        init: a['init'] as Tensor | InitSpec,
      };
      const prev = out.get(name);
      if (prev) {
        if (!typesEqual(prev.type, info.type) || prev.role !== info.role) {
          diagnostics.push(error(`'${name}' is declared as ${prev.role} ${formatType(prev.type)} and as ${info.role} ${formatType(info.type)}`, op.loc));
        }
      } else out.set(name, info);
    }
  }
  return out;
}

/** Checks that every execute names a graph, streams name inputs, reductions name variables. */
export function verifyModule(m: Module): Diagnostic[] {
  const ds: Diagnostic[] = [];
  const inputs = new Set<string>();
  for (const g of m.graphs.values()) for (const op of g.inputs()) inputs.add(op.attrs['name'] as string);
  const visit = (n: ProgramNode): void => {
    switch (n.kind) {
      case 'sequence':
        n.body.forEach(visit);
        break;
      case 'repeat':
        if (!Number.isInteger(n.count) || n.count < 0) ds.push(error(`repeat count ${n.count} is not a non-negative integer`));
        visit(n.body);
        break;
      case 'execute':
        if (!m.graphs.has(n.graph)) ds.push(error(`execute: no graph named '${n.graph}'`));
        break;
      case 'stream_in':
        for (const s of n.inputs) if (!inputs.has(s)) ds.push(error(`stream_in: no graph input named '${s}'`));
        break;
      case 'all_reduce':
        for (const v of n.variables) if (!m.variables.has(v)) ds.push(error(`all_reduce: no variable named '${v}'`));
        break;
    }
  };
  visit(m.program);
  return ds;
}

/** Text form of a program tree. */
export function printProgram(p: ProgramNode, indent = ''): string {
  const inner = indent + '  ';
  switch (p.kind) {
    case 'sequence':
      return `${indent}sequence {\n${p.body.map((b) => printProgram(b, inner)).join('\n')}\n${indent}}`;
    case 'repeat':
      return `${indent}repeat ${p.count} {\n${printProgram(p.body, inner)}\n${indent}}`;
    case 'execute':
      return `${indent}execute @${p.graph}`;
    case 'stream_in':
      return `${indent}stream_in ${p.inputs.map((s) => JSON.stringify(s)).join(', ')}`;
    case 'all_reduce':
      return `${indent}all_reduce ${p.op} ${p.variables.map((s) => JSON.stringify(s)).join(', ')}`;
  }
}

function formatGroup(g: CommGroup | undefined): string {
  if (!g || g.type === 'all') return 'all';
  if (g.type === 'none') return 'none';
  return `${g.type}(${g.size})`;
}

/** Text form of a module: variables, program, then each graph. */
export function printModule(m: Module, opts: { debugInfo?: boolean } = {}): string {
  const lines = [`module @${m.name} replicas ${m.replicationFactor} {`];
  for (const v of m.variables.values()) {
    lines.push(`  ${v.role} ${JSON.stringify(v.name)} : ${formatType(v.type)} group ${formatGroup(v.group)}`);
  }
  lines.push(printProgram(m.program, '  '));
  lines.push('}');
  for (const g of m.graphs.values()) lines.push(printGraph(g, opts));
  return lines.join('\n');
}

/** (stride, size) of a replica grouping over `replicas` replicas, as PopART computes it. */
export function groupStrideAndSize(g: CommGroup | undefined, replicas: number): { stride: number; size: number } {
  if (!g || g.type === 'all') return { stride: 1, size: replicas };
  if (g.type === 'none') return { stride: 1, size: 1 };
  if (!Number.isInteger(g.size) || g.size < 1 || replicas % g.size !== 0) {
    throw new Error(`replica group size ${g.size} does not divide the replication factor ${replicas}`);
  }
  return g.type === 'consecutive' ? { stride: 1, size: g.size } : { stride: replicas / g.size, size: g.size };
}

/** The groups of replicas: groups[g][i] is the i-th replica of group g. */
export function replicaGroups(g: CommGroup | undefined, replicas: number): number[][] {
  const { stride: s, size: k } = groupStrideAndSize(g, replicas);
  const n = replicas / k;
  return Array.from({ length: n }, (_, grp) => Array.from({ length: k }, (_, i) => Math.floor(grp / s) * (s * k) + (grp % s) + i * s));
}

/** The group a replica belongs to. */
export function groupOfReplica(g: CommGroup | undefined, replicas: number, r: number): number {
  const { stride: s, size: k } = groupStrideAndSize(g, replicas);
  return (r % s) + s * Math.floor(r / (s * k));
}
