import * as path from 'node:path';
import { Command } from 'commander';
import { positiveInt, naturalInt } from '../flags.js';
import { fuzzSeeds } from './seeds.js';
import { fuzzCases, runFuzzCases, saveFailure } from './runner.js';
import { exportedSeeds } from './exe.js';

/** `npm run fuzz -- [runs] [--seed N] [--jobs N] [--kinds tg,onnx,...] [--save DIR]`. */
async function fuzzMain(argv: string[]): Promise<number> {
  const program = new Command()
    .name('fuzz')
    .description('run mutated model, IR, ONNX, options and executable files through tilegraph; fail on internal errors, crashes, hangs or runaway memory')
    .argument('[runs]', 'number of cases', positiveInt, 500)
    .option('--seed <n>', 'seed of the case generator', naturalInt, 1)
    .option('--jobs <n>', 'worker processes', positiveInt, 2)
    .option('--timeout <s>', 'seconds a case may take', positiveInt, 30)
    .option('--kinds <list>', 'seed kinds: tg, tgir, onnx, options, exe', 'tg,tgir,onnx,options,exe')
    .option('--save <dir>', 'folder for failing cases', 'fuzz-failures');
  program.parse(argv, { from: 'user' });
  const runs = program.processedArgs[0] as number;
  const o = program.opts<{ seed: number; jobs: number; timeout: number; kinds: string; save: string }>();
  const kinds = new Set(o.kinds.split(',').map((k) => k.trim()));
  const seeds = fuzzSeeds(kinds.has('exe') ? exportedSeeds() : []).filter((s) => kinds.has(s.kind));
  const cases = fuzzCases(seeds, o.seed, runs);
  const t0 = Date.now();
  const results = await runFuzzCases(cases, {
    seed: o.seed,
    runs,
    jobs: o.jobs,
    timeoutMs: o.timeout * 1000,
    onResult: (r, done, total) => {
      if (r.outcome !== 'ok') process.stdout.write(`case ${r.case.index}: ${r.outcome} (${r.case.seed.name}: ${r.case.argv.join(' ')})\n`);
      if (done % 50 === 0 || done === total) process.stdout.write(`${done}/${total} cases\n`);
    },
  });
  const failed = results.filter((r) => r.outcome !== 'ok');
  const byCode = new Map<string, number>();
  for (const r of results) byCode.set(String(r.code ?? r.outcome), (byCode.get(String(r.code ?? r.outcome)) ?? 0) + 1);
  process.stdout.write(`${results.length} cases in ${((Date.now() - t0) / 1000).toFixed(0)} s (seed ${o.seed}): ${[...byCode].map(([k, n]) => `${n} × ${k}`).join(', ')}\n`);
  for (const r of failed) process.stdout.write(`  ${r.outcome}: ${saveFailure(path.resolve(o.save), r)}\n`);
  process.stdout.write(failed.length ? `${failed.length} failures (saved in ${o.save})\n` : 'no failures\n');
  return failed.length ? 1 : 0;
}

void fuzzMain(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
