import { Command } from 'commander';
import { Options } from '@tilegraph/frontend';
import { Diagnostic, Module } from '@tilegraph/ir';
import { PassTiming, PipelineInfo, Placement, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { stepSettingsFrom } from '@tilegraph/runtime';
import { UsageError } from '../diagnostics.js';
import { loadModel } from '../load.js';
import { OPTIMIZER_FLAGS, loadOptionsFile, optimizerFromFlag } from '../options.js';
import { passFlags, registerPassFlags } from './passflags.js';
import { IMPORT_PATH_FLAG, importPathsOf, positiveInt } from '../flags.js';

/** The flags that say which step a command builds: the same for compile and report. */
export function registerStepFlags(cmd: Command): Command {
  cmd
    .argument('<model>', 'model file (.tg, .onnx or .tgir)')
    .option('--pipeline <kind>', 'training or inference', 'training')
    .option('--optimizer <name>', `optimizer of the training step (${Object.keys(OPTIMIZER_FLAGS).join(', ')})`, 'sgd')
    .option('--options <file>', 'options: JSON, or PopTorch-style setters one a line')
    .option('--batch-size <n>', "micro-batch size (the model's `batch` parameter)", positiveInt)
    .option('--arg <name=value...>', 'a parameter of a model-language model (numbers, true/false or text), e.g. --arg layers=2 ipus=1')
    .option(...IMPORT_PATH_FLAG);
  return registerPassFlags(cmd);
}

export interface BuiltStep {
  readonly module: Module;
  readonly options: Options;
  readonly pipeline: 'training' | 'inference';
  readonly warnings: readonly Diagnostic[];
  readonly timings: readonly PassTiming[];
  readonly timePasses: boolean;
  /** The forward stages and their IPUs. */
  readonly placement?: Placement;
  /** The pipeline's stages and schedule, when the step is pipelined. */
  readonly schedule?: PipelineInfo;
}

/** Loads the model and builds the training or inference step the flags describe. */
export function buildStep(model: string, o: Record<string, unknown>): BuiltStep {
  const options: Options = o['options'] ? loadOptionsFile(o['options'] as string) : new Options();
  const pipeline = o['pipeline'];
  if (pipeline !== 'training' && pipeline !== 'inference') throw new UsageError(`--pipeline must be training or inference, got '${String(pipeline)}'`);
  const batchSize = o['batchSize'] as number | undefined;
  const args = modelArgs(o['arg'] as string[] | undefined);
  const g = loadModel(model, { ...(batchSize !== undefined ? { batchSize } : {}), ...(args ? { args } : {}), ...importPathsOf(o) });
  const { passes, timePasses } = passFlags(o);
  const step = stepSettingsFrom(options);
  if (pipeline === 'training') {
    const t = buildTrainingModule(g, step, makeOptimizer(optimizerFromFlag(o['optimizer'] as string)), passes);
    return { module: t.module, options, pipeline, warnings: t.diagnostics, timings: t.timings, timePasses, placement: t.placement, ...(t.pipeline ? { schedule: t.pipeline } : {}) };
  }
  const warnings: Diagnostic[] = [];
  const out: { placement?: Placement; pipeline?: PipelineInfo } = {};
  const module = buildInferenceModule(g, step, warnings, out);
  return { module, options, pipeline, warnings, timings: [], timePasses, ...(out.placement ? { placement: out.placement } : {}), ...(out.pipeline ? { schedule: out.pipeline } : {}) };
}

/** `--arg name=value` values: numbers, booleans, or text. */
export function modelArgs(list: readonly string[] | undefined): Record<string, number | boolean | string> | undefined {
  if (!list?.length) return undefined;
  const out: Record<string, number | boolean | string> = {};
  for (const a of list) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(a);
    if (!m) throw new UsageError(`--arg ${a}: expected name=value`);
    const v = m[2]!;
    out[m[1]!] = v === 'true' ? true : v === 'false' ? false : v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : v;
  }
  return out;
}
