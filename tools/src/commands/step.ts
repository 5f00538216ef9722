import { Command } from 'commander';
import { Options } from '@tilegraph/frontend';
import { Diagnostic, DiagnosticError, Module } from '@tilegraph/ir';
import { PassTiming, PipelineInfo, Placement, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { stepSettingsFrom } from '@tilegraph/runtime';
import { UsageError } from '../diagnostics.js';
import { loadModel } from '../load.js';
import { OPTIMIZER_FLAGS, loadOptionsFile, optimizerFromFlag } from '../options.js';
import { passFlags, registerPassFlags } from './passflags.js';
import { modelFlagsOf, registerModelFlags } from '../modelflags.js';
import { LOSS_FLAG, withLoss } from '../loss.js';

/** The flags that say which step a command builds: the same for compile and report. */
export function registerStepFlags(cmd: Command): Command {
  cmd
    .argument('<model>', 'model file (.tg, .onnx or .tgir)')
    .option('--pipeline <kind>', 'training or inference', 'training')
    .option('--optimizer <name>', `optimizer of the training step (${Object.keys(OPTIMIZER_FLAGS).join(', ')})`, 'sgd')
    .option('--options <file>', 'options: JSON, or PopTorch-style setters one a line')
    .option(...LOSS_FLAG);
  registerModelFlags(cmd);
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
  const { passes, timePasses } = passFlags(o);
  const options: Options = o['options'] ? loadOptionsFile(o['options'] as string) : new Options();
  const pipeline = o['pipeline'];
  if (pipeline !== 'training' && pipeline !== 'inference') throw new UsageError(`--pipeline must be training or inference, got '${String(pipeline)}'`);
  const loss = o['loss'] as string | undefined;
  if (loss !== undefined && pipeline === 'inference') throw new UsageError('--loss adds a loss for training; the inference pipeline has no use for it (drop --loss, or use --pipeline training)');
  const loaded = loadModel(model, modelFlagsOf(o));
  const g = loss !== undefined ? withLoss(loaded, loss) : loaded;
  const step = stepSettingsFrom(options);
  if (pipeline === 'training') {
    const t = withLossHint(() => buildTrainingModule(g, step, makeOptimizer(optimizerFromFlag(o['optimizer'] as string)), passes));
    return { module: t.module, options, pipeline, warnings: t.diagnostics, timings: t.timings, timePasses, placement: t.placement, ...(t.pipeline ? { schedule: t.pipeline } : {}) };
  }
  const warnings: Diagnostic[] = [];
  const out: { placement?: Placement; pipeline?: PipelineInfo } = {};
  const module = buildInferenceModule(g, step, warnings, out);
  return { module, options, pipeline, warnings, timings: [], timePasses, ...(out.placement ? { placement: out.placement } : {}), ...(out.pipeline ? { schedule: out.pipeline } : {}) };
}

/** The training pipeline's "no loss" names the API; on the command line --loss or --pipeline inference help. */
export function withLossHint<T>(build: () => T): T {
  try {
    return build();
  } catch (e) {
    if (e instanceof DiagnosticError && e.diagnostics.some((d) => d.message === 'the model has no loss')) {
      const hint = 'on the command line: --loss cross_entropy or --loss mse puts one on the first output, or --pipeline inference compiles the forward pass alone';
      throw new DiagnosticError(e.diagnostics.map((d) => (d.message === 'the model has no loss' ? { ...d, notes: [...(d.notes ?? []), hint] } : d)));
    }
    throw e;
  }
}
