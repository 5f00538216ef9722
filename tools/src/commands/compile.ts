import * as path from 'node:path';
import { Command } from 'commander';
import { generatePoplar, hostUnits } from '@tilegraph/codegen-poplar';
import { formatTimings } from '@tilegraph/passes';
import { compileAndExport, compileOptionsFrom, findToolchain, popcTargets } from '@tilegraph/runtime';
import { UsageError, stderrReporter } from '../diagnostics.js';
import { checkEmitFolder, checkOutputFile, makeOutputFolder, writeAtomic } from '../files.js';
import { buildStep, registerStepFlags } from './step.js';
import { checkCacheFolderUpFront } from '../cachedir.js';
import { loadOptionsFile } from '../options.js';
import { Options } from '@tilegraph/frontend';
import { emitDocument } from '../json.js';
import { EXPLAIN_CACHE_FLAG, cacheJson, cacheNote } from '../flags.js';

/**
 * `tilegraph compile`: the training or inference step as Poplar C++ (codelets.cpp, host.cpp, the
 * host support library tilegraph_host.hpp and .cpp, plan.json) for a user with the Poplar SDK to
 * build with popc and g++, and/or built and exported as one executable file that
 * `loadExecutable` runs.
 */
export function registerCompile(program: Command): void {
  const cmd = program.command('compile').description('compile a model to Poplar C++ (--emit-cpp DIR) and/or to an exported executable (-o FILE)');
  registerStepFlags(cmd)
    .option('--emit-cpp <dir>', 'write codelets.cpp, host.cpp (and host_graph.cpp, host_layers.cpp for a large program), the host support library (tilegraph_host.hpp and .cpp) and plan.json into this folder')
    .option('-o, --output <file>', 'build and write the executable (with its plan and initial state)')
    .option('--force', 'let --emit-cpp write into a folder that holds other files')
    .option('--no-progress', 'no progress bar while the executable is built')
    .option(...EXPLAIN_CACHE_FLAG)
    .option('--json', 'print one JSON document: what was written, the target, the build time and whether the executable cache held it');
  cmd.action((model: string, o: Record<string, unknown>) => {
    const emit = o['emitCpp'] as string | undefined;
    const out = o['output'] as string | undefined;
    if (!emit && !out) throw new UsageError('say what to produce: --emit-cpp DIR and/or -o FILE');
    // outputs are checked before the (possibly long) build
    const inputs = [model, ...(o['options'] ? [o['options'] as string] : [])];
    if (out) checkOutputFile(out, '-o', inputs);
    if (emit) checkEmitFolder(emit, !!o['force'], inputs);
    // -o builds into the executable cache: a folder that cannot be used is said before the work
    if (out) checkCacheFolderUpFront((o['options'] ? loadOptionsFile(o['options'] as string) : new Options()).executable_cache_dir);
    const json = !!o['json'];
    const say = (line: string) => {
      if (!json) process.stdout.write(line + '\n');
    };
    const { module, options, pipeline, warnings, timings, timePasses } = buildStep(model, o);
    if (timePasses && timings.length && !json) process.stderr.write(formatTimings(timings) + '\n');
    stderrReporter().report(warnings);
    if (o['progress'] === false) options.showCompilationProgressBar(false);
    const copts = compileOptionsFrom(options);
    const doc: Record<string, unknown> = { model: module.name, file: model, pipeline };
    if (timePasses) doc['timings'] = timings.map((t) => ({ pass: t.pass, ms: Math.round(t.ms * 1000) / 1000, ...(t.ops !== undefined ? { ops: t.ops } : {}) }));
    if (emit) {
      const sources = generatePoplar(module, copts);
      makeOutputFolder(emit, '--emit-cpp');
      for (const [name, text] of Object.entries(sources.files)) writeAtomic(path.join(emit, name), text);
      say(`Poplar C++ written to ${emit}: ${Object.keys(sources.files).join(', ')}`);
      // the device the options chose decides popc's targets (an SDK before 3.0 links -lgcl_ct)
      const targets = popcTargets(copts.device, undefined).join(',');
      say(`  with the SDK: popc -O3 --target ${targets} codelets.cpp -o codelets.gp && g++ -std=c++17 ${hostUnits(sources.files).join(' ')} tilegraph_host.cpp -o step -lpoplar -lpopops -lpoplin -lpopnn -lpoputil -lpoprand -lgcl (-lgcl_ct before SDK 3.0)`);
      doc['emitted'] = { dir: emit, files: Object.keys(sources.files) };
    }
    if (out) {
      const tc = findToolchain();
      const t0 = performance.now();
      const cache = compileAndExport(module, out, copts);
      const secs = (performance.now() - t0) / 1000;
      const target = tc.kind === 'sdk' ? 'the IPU (Poplar SDK)' : 'the emulated IPU (poplar-host)';
      say(`executable for ${target} written to ${out} in ${secs.toFixed(1)} s${cacheNote(cache, !!o['explainCache'])}`);
      doc['executable'] = { file: out, target: tc.kind === 'sdk' ? 'ipu' : 'emulation', seconds: Math.round(secs * 1000) / 1000, ...cacheJson(cache) };
    }
    if (json) emitDocument(doc);
  });
}
