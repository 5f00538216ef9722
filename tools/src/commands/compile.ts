import * as fs from 'node:fs';
import * as path from 'node:path';
import { Command } from 'commander';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { formatTimings } from '@tilegraph/passes';
import { compileAndExport, compileOptionsFrom, findToolchain } from '@tilegraph/runtime';
import { UsageError, stderrReporter } from '../diagnostics.js';
import { checkEmitFolder, checkOutputFile, writeAtomic } from '../files.js';
import { buildStep, registerStepFlags } from './step.js';

/**
 * `tilegraph compile`: the training or inference step as Poplar C++ (codelets.cpp, host.cpp,
 * plan.json) for a user with the Poplar SDK to build with popc and g++, and/or built and
 * exported as one executable file that `loadExecutable` runs.
 */
export function registerCompile(program: Command): void {
  const cmd = program.command('compile').description('compile a model to Poplar C++ (--emit-cpp DIR) and/or to an exported executable (-o FILE)');
  registerStepFlags(cmd)
    .option('--emit-cpp <dir>', 'write codelets.cpp, host.cpp and plan.json into this folder')
    .option('-o, --output <file>', 'build and write the executable (with its plan and initial state)')
    .option('--force', 'let --emit-cpp write into a folder that holds other files');
  cmd.action((model: string, o: Record<string, unknown>) => {
    const emit = o['emitCpp'] as string | undefined;
    const out = o['output'] as string | undefined;
    if (!emit && !out) throw new UsageError('say what to produce: --emit-cpp DIR and/or -o FILE');
    // outputs are checked before the (possibly long) build
    const inputs = [model, ...(o['options'] ? [o['options'] as string] : [])];
    if (out) checkOutputFile(out, '-o', inputs);
    if (emit) checkEmitFolder(emit, !!o['force'], inputs);
    const { module, options, warnings, timings, timePasses } = buildStep(model, o);
    if (timePasses && timings.length) process.stderr.write(formatTimings(timings) + '\n');
    stderrReporter().report(warnings);
    const copts = compileOptionsFrom(options);
    if (emit) {
      const sources = generatePoplar(module, copts);
      fs.mkdirSync(emit, { recursive: true });
      for (const [name, text] of Object.entries(sources.files)) writeAtomic(path.join(emit, name), text);
      process.stdout.write(`Poplar C++ written to ${emit}: codelets.cpp, host.cpp, plan.json\n`);
      process.stdout.write(`  with the SDK: popc -O3 --target ipu2 codelets.cpp -o codelets.gp && g++ -std=c++17 host.cpp -o step -lpoplar -lpopops -lpoplin -lpoputil -lpoprand -lgcl\n`);
    }
    if (out) {
      const tc = findToolchain();
      const t0 = performance.now();
      compileAndExport(module, out, copts);
      process.stdout.write(`executable for ${tc.kind === 'sdk' ? 'the IPU (Poplar SDK)' : 'the emulated IPU (poplar-host)'} written to ${out} in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    }
  });
}
