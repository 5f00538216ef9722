import { Command } from 'commander';
import { Diagnostic, printGraph, printModule } from '@tilegraph/ir';
import { DEFAULT_SOURCE_LOCATION_EXCLUDES, Options } from '@tilegraph/frontend';
import { buildInferenceModule, buildTrainingModule, formatTimings, makeOptimizer } from '@tilegraph/passes';
import { stepSettingsFrom } from '@tilegraph/runtime';
import { UsageError, stderrReporter } from '../diagnostics.js';
import { IMPORT_PATH_FLAG, importPathsOf, positiveInt } from '../flags.js';
import { loadModel } from '../load.js';
import { OPTIMIZER_FLAGS, loadOptionsFile, optimizerFromFlag } from '../options.js';
import { passFlags, registerPassFlags } from './passflags.js';

export function registerIr(program: Command): void {
  const cmd = program
    .command('ir')
    .description('print the text IR of a model (.tg, .onnx or .tgir), optionally after the compile pipeline')
    .argument('<model>', 'model file')
    .option('--options <file>', 'options: a JSON file or a PopTorch-style file with one setter per line')
    .option('--exclude <pattern...>', 'source-location excludes (like sourceLocationExcludes): print the first frame not matching')
    .option('--batch-size <n>', 'micro-batch size (symbolic ONNX batch dims; the `batch` parameter of a .tg model)', positiveInt)
    .option(...IMPORT_PATH_FLAG)
    .option('--pipeline <kind>', 'run the compile pipeline first: training or inference')
    .option('--optimizer <name>', `optimizer of the training pipeline (${Object.keys(OPTIMIZER_FLAGS).join(', ')})`, 'sgd');
  registerPassFlags(cmd);
  cmd.action((model: string, o: Record<string, unknown>) => {
    const options: Options = o['options'] ? loadOptionsFile(o['options'] as string) : new Options();
    const cli = (o['exclude'] as string[] | undefined) ?? [];
    // user excludes from the options file apply too; the library defaults only when none are given
    const fromOptions = options.source_location_excludes.filter((e) => !DEFAULT_SOURCE_LOCATION_EXCLUDES.includes(e));
    const excludes = [...fromOptions, ...cli];
    const batchSize = o['batchSize'] as number | undefined;
    const g = loadModel(model, { excludes, ...(batchSize !== undefined ? { batchSize } : {}), ...importPathsOf(o as Record<string, unknown>) });
    const { passes, timePasses } = passFlags(o);
    const debugInfo = passes.debugInfo || excludes.length > 0;
    const printOpts = { debugInfo, ...(excludes.length ? { locationExcludes: excludes } : {}) };
    const out = (t: string) => process.stdout.write(t.endsWith('\n') ? t : t + '\n');
    const pipeline = o['pipeline'] as string | undefined;
    if (pipeline === undefined) {
      if (passes.printIrAfter?.length || passes.printIrAfterAll || passes.printIrAfterChange) {
        throw new UsageError('IR dumps after passes need a pipeline: add --pipeline training or --pipeline inference');
      }
      out(printGraph(g, printOpts));
      return;
    }
    const step = stepSettingsFrom(options);
    const pm = { ...passes, debugInfo, ...(excludes.length ? { locationExcludes: excludes } : {}), dump: out };
    if (pipeline === 'training') {
      const opt = optimizerFromFlag(o['optimizer'] as string);
      const t = buildTrainingModule(g, step, makeOptimizer(opt), pm);
      if (!passes.printIrAfter?.length && !passes.printIrAfterAll && !passes.printIrAfterChange) out(printModule(t.module, printOpts));
      if (timePasses) process.stderr.write(formatTimings(t.timings) + '\n');
      stderrReporter(excludes).report(t.diagnostics);
    } else if (pipeline === 'inference') {
      const warnings: Diagnostic[] = [];
      out(printModule(buildInferenceModule(g, step, warnings), printOpts));
      stderrReporter(excludes).report(warnings);
    } else {
      throw new UsageError(`--pipeline must be training or inference, got '${pipeline}'`);
    }
  });
}
