import { benchImport } from './import.js';
import { benchIr } from './ir.js';
import { benchMemory } from './memory.js';
import { benchPipeline } from './pipeline.js';
import { benchRun } from './run.js';

/**
 * `npm run bench -- <name...>`: runs the named benchmarks (all of them when none is named).
 * Add a benchmark by adding it to BENCHMARKS.
 */
export const BENCHMARKS: Record<string, () => Promise<void>> = {
  ir: benchIr,
  import: benchImport,
  run: benchRun,
  memory: benchMemory,
  pipeline: benchPipeline,
};

async function main(argv: readonly string[]): Promise<number> {
  const names = argv.filter((a) => !a.startsWith('-'));
  const unknown = names.filter((n) => !(n in BENCHMARKS));
  if (unknown.length) {
    console.error(`error: unknown benchmark${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `'${n}'`).join(', ')} (benchmarks: ${Object.keys(BENCHMARKS).join(', ')})`);
    return 2;
  }
  for (const name of names.length ? names : Object.keys(BENCHMARKS)) {
    const t0 = Date.now();
    await BENCHMARKS[name]!();
    console.log(`${name}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    process.exitCode = 1;
  },
);
