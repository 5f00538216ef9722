import { DType, Op, numElements } from '@tilegraph/ir';
import { ModuleContext, StateInfo, shapeLiteral } from './context.js';
import { declareIoBuffers } from './io-tiles.js';
import { convGeometry } from './layout.js';
import { convParamsExpr } from './lower/conv.js';
import { multiConvOptionList } from './lower/multiconv.js';
import { poplinOptionList } from './lower/poplin-options.js';
import { Allocation } from './memory.js';
import { cppComment, cppStringLiteral } from './sanitize.js';
import { deviceType } from './types.js';

/**
 * A host program's declarations: the state and input tensors (as constant tables the support
 * library's declareState / declareInputs read), the output streams and the random generators'
 * seed and counter.
 */

/**
 * A state or input tensor laid out for the matmul or convolution that first reads it (poplin
 * creates it, with that operation's option flags); undefined when it is spread linearly.
 */
function plannedStateTensor(mc: ModuleContext, key: string, s: { ipu: number; dtype: DType; shape: readonly number[]; name: string }): string | undefined {
  const dt = deviceType(s.dtype);
  const p = mc.planned.get(key);
  const name = cppStringLiteral(s.name, 64);
  if (p?.op === 'matmul') {
    const create = p.role === 'lhs' ? 'createMatMulInputLHS' : 'createMatMulInputRHS';
    return `poplin::${create}(d.ipu[${s.ipu}], ${dt.poplar}, ${shapeLiteral(p.aShape)}, ${shapeLiteral(p.bShape)}, ${name}, poplar::OptionFlags${poplinOptionList(p.reader, mc)})`;
  }
  if (p?.op === 'conv' && p.multiConv) return plannedMultiConvTensor(mc, p.multiConv, p.reader, p.role, s);
  if (p?.op === 'conv') {
    const create = p.role === 'input' ? 'createInput' : 'createWeights';
    return `poplin::${create}(d.ipu[${s.ipu}], ${convParamsExpr(p.conv, s.dtype)}, ${name}, poplar::OptionFlags${poplinOptionList(p.reader, mc)}).reshape(${shapeLiteral(s.shape)})`;
  }
  return undefined;
}

/**
 * A convolution operand laid out for the multi-convolution its reader is part of:
 * poplin::multiconv::createInput / createWeights with every member's parameters and flags.
 */
function plannedMultiConvTensor(mc: ModuleContext, members: readonly Op[], reader: Op, role: 'input' | 'weights', s: { ipu: number; dtype: DType; shape: readonly number[]; name: string }): string {
  const m = reader.annotations.multiConv!;
  const name = cppStringLiteral(s.name, 64);
  const args = members.map((op) => `{${convParamsExpr(convGeometry(op), op.result.type.dtype)}, poplar::OptionFlags${poplinOptionList(op, mc)}, ${name}}`);
  const create = role === 'input' ? 'createInput' : 'createWeights';
  return `poplin::multiconv::${create}(d.ipu[${s.ipu}], std::vector<poplin::multiconv::CreateTensorArgs>{${args.join(', ')}}, ${members.indexOf(reader)}, poplar::OptionFlags${multiConvOptionList(m)}).reshape(${shapeLiteral(s.shape)})`;
}

const STORAGE = { on_chip: 'kOnChip', off_chip: 'kOffChip', transient: 'kTransient' } as const;

type TensorListing = readonly { ipu: number; dtype: DType; shape: readonly number[]; name: string; storage?: StateInfo['storage'] }[];

/** The distinct types and shapes of a program's tensor tables, in order of first use. */
class TableLists {
  readonly types: string[] = [];
  readonly shapes: string[] = [];

  index(list: string[], x: string): number {
    const at = list.indexOf(x);
    return at >= 0 ? at : list.push(x) - 1;
  }
}

/**
 * The state's or inputs' rows for declareState / declareInputs (one each, in handle order), and
 * the statements making those PopLibs lays out.
 */
function tensorRows(mc: ModuleContext, prefix: 'st' | 'in', made: string, list: TensorListing, buffers: ReadonlyMap<string, Allocation>, lists: TableLists): { planned: string[]; rows: string[] } {
  const planned: string[] = [];
  const rows = list.map((s, i) => {
    const p = plannedStateTensor(mc, `${prefix}:${s.name}`, s);
    if (p) planned.push(`  ${made}[${i}] = ${p};`);
    // (declareState maps it by linearMappingParams' rule)
    const offset = buffers.get(s.name)!.span.offset;
    const type = lists.index(lists.types, deviceType(s.dtype).poplar);
    const shape = lists.index(lists.shapes, shapeLiteral(s.shape));
    return `  {${cppStringLiteral(s.name, 64)}, ${type}, ${shape}, ${s.ipu}, ${offset}, ${STORAGE[s.storage ?? 'on_chip']}},`;
  });
  return { planned, rows };
}

/**
 * declare(): the state, input tensors and streams (the handles the protocol names). The tensors
 * are rows of constant tables at file scope (`tables`), which compile far faster than code.
 */
export function generateDeclare(mc: ModuleContext): { tables: string; declare: string } {
  const lists = new TableLists();
  const state = tensorRows(mc, 'st', 'madeState', mc.state, mc.stateBuffers, lists);
  const inputs = tensorRows(mc, 'in', 'madeInputs', mc.inputs, mc.inputBuffers, lists);
  const tables = [
    '// the state and input tensors: name, type (of declare()\'s types), shape (of kShapes), IPU, first tile, storage',
    `const std::vector<std::vector<std::size_t>> kShapes = {${lists.shapes.join(', ')}};`,
    'const std::vector<TensorRow> kStateRows = {',
    ...state.rows,
    '};',
    'const std::vector<TensorRow> kInputRows = {',
    ...inputs.rows,
    '};',
  ].join('\n');
  const l: string[] = ['void declare(Device &d) {'];
  l.push(`  const std::vector<poplar::Type> types = {${lists.types.join(', ')}};`);
  l.push('  std::map<std::size_t, poplar::Tensor> madeState, madeInputs;', ...state.planned, ...inputs.planned);
  l.push('  declareState(d, {kStateRows, types, kShapes}, madeState);');
  l.push('  declareInputs(d, {kInputRows, types, kShapes}, madeInputs);');
  for (const o of mc.outputs) {
    l.push(`  // ${o.kind} ${cppComment(o.kind === 'print' ? (o.title ?? '') : o.name, 80)}`);
    l.push(`  d.outFifo.push_back(d.graph.addDeviceToHostFIFO("out${o.index}", ${deviceType(o.dtype).poplar}, ${numElements(o.shape)}));`);
  }
  l.push(...declareIoBuffers(mc));
  if (mc.usesRandom) {
    l.push('  // the replica\'s mixed run seed and the execution counter of the random generators');
    l.push('  d.seed = d.ipu[0].addVariable(poplar::UNSIGNED_INT, {}, "seed");');
    l.push('  d.ipu[0].setTileMapping(d.seed, 0);');
    l.push('  d.step = d.ipu[0].addVariable(poplar::UNSIGNED_INT, {}, "step");');
    l.push('  d.ipu[0].setTileMapping(d.step, 0);');
    l.push('  d.graph.createHostWrite("seed.w", d.seed);');
    l.push('  d.graph.createHostRead("seed.r", d.seed);');
    l.push('  d.graph.createHostWrite("step.w", d.step);');
    l.push('  d.graph.createHostRead("step.r", d.step);');
  }
  l.push('}');
  return { tables, declare: l.join('\n') };
}

export function sizeTable(name: string, values: readonly number[]): string {
  return `const std::vector<std::size_t> ${name} = {${values.join(', ')}};`;
}

/** The CPU ops' host functions: handle and bytes of each input and output (one replica). */
export function hostFunctionTable(mc: ModuleContext): string {
  const bytes = (ts: readonly { dtype: DType; shape: readonly number[] }[]) => `{${ts.map((t) => numElements(t.shape) * deviceType(t.dtype).bytes).join(', ')}}`;
  const rows = mc.hostFunctions.map((f) => `  {"${f.handle}", ${bytes(f.inputs)}, ${bytes(f.outputs)}}, // cpu_op ${cppComment(f.name, 60)}`);
  return ['// CPU ops: host function, bytes of its inputs and outputs (one replica)', 'const std::vector<HostFunctionSpec> kHostFunctions = {', ...rows, '};'].join('\n');
}
