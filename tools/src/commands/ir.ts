import { Command } from 'commander';
import { Diagnostic, printGraph, printModule } from '@tilegraph/ir';
import { DEFAULT_SOURCE_LOCATION_EXCLUDES, Options } from '@tilegraph/frontend';
import { PassTiming, buildInferenceModule, buildTrainingModule, formatTimings, makeOptimizer } from '@tilegraph/passes';
import { emitDocument } from '../json.js';
import { stepSettingsFrom } from '@tilegraph/runtime';
import { UsageError, stderrReporter } from '../diagnostics.js';
import { modelFlagsOf, registerModelFlags } from '../modelflags.js';
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
    .option('--pipeline <kind>', 'run the compile pipeline first: training or inference')
    .option('--optimizer <name>', `optimizer of the training pipeline (${Object.keys(OPTIMIZER_FLAGS).join(', ')})`, 'sgd');
  registerModelFlags(cmd);
  registerPassFlags(cmd);
  cmd.option('--json', 'print one JSON document: the model, the IR text, the IR dumps after passes, the pass times and the warnings');
  cmd.action((model: string, o: Record<string, unknown>) => {
    const { passes, timePasses } = passFlags(o);
    const options: Options = o['options'] ? loadOptionsFile(o['options'] as string) : new Options();
    const cli = (o['exclude'] as string[] | undefined) ?? [];
    // user excludes from the options file apply too; the library defaults only when none are given
    const fromOptions = options.source_location_excludes.filter((e) => !DEFAULT_SOURCE_LOCATION_EXCLUDES.includes(e));
    const excludes = [...fromOptions, ...cli];
    const g = loadModel(model, { excludes, ...modelFlagsOf(o) });
    const debugInfo = passes.debugInfo || excludes.length > 0;
    const printOpts = { debugInfo, ...(excludes.length ? { locationExcludes: excludes } : {}) };
    const json = !!o['json'];
    // with --json the texts are collected into the document instead of printed
    const dumps: string[] = [];
    let ir: string | undefined;
    const out = (t: string) => (json ? (ir = t) : process.stdout.write(t.endsWith('\n') ? t : t + '\n'));
    const dump = (t: string) => (json ? dumps.push(t) : process.stdout.write(t.endsWith('\n') ? t : t + '\n'));
    const pipeline = o['pipeline'] as string | undefined;
    const dumping = !!(passes.printIrAfter?.length || passes.printIrAfterAll || passes.printIrAfterChange);
    let timings: readonly PassTiming[] = [];
    if (pipeline === undefined) {
      if (dumping) throw new UsageError('IR dumps after passes need a pipeline: add --pipeline training or --pipeline inference');
      out(printGraph(g, printOpts));
    } else {
      const step = stepSettingsFrom(options);
      const pm = { ...passes, debugInfo, ...(excludes.length ? { locationExcludes: excludes } : {}), dump };
      if (pipeline === 'training') {
        const opt = optimizerFromFlag(o['optimizer'] as string);
        const t = buildTrainingModule(g, step, makeOptimizer(opt), pm);
        if (!dumping) out(printModule(t.module, printOpts));
        timings = t.timings;
        if (timePasses && !json) process.stderr.write(formatTimings(t.timings) + '\n');
        stderrReporter(excludes).report(t.diagnostics);
      } else if (pipeline === 'inference') {
        const warnings: Diagnostic[] = [];
        out(printModule(buildInferenceModule(g, step, warnings), printOpts));
        stderrReporter(excludes).report(warnings);
      } else {
        throw new UsageError(`--pipeline must be training or inference, got '${pipeline}'`);
      }
    }
    if (json) {
      emitDocument({
        model: g.name,
        file: model,
        ...(pipeline ? { pipeline } : {}),
        ...(ir !== undefined ? { ir } : {}),
        ...(dumps.length ? { dumps } : {}),
        ...(timePasses ? { timings: timings.map((t) => ({ pass: t.pass, ms: Math.round(t.ms * 1000) / 1000, ...(t.ops !== undefined ? { ops: t.ops } : {}) })) } : {}),
      });
    }
  });
}
