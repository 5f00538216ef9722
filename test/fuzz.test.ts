import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ROOT } from './support/cli.js';

/**
 * The fuzzer as CI runs it: a few hundred mutated model-language, text-IR, ONNX, options and
 * exported-executable files with a fixed seed. Every case must end in a result or a diagnostic
 * (exit 0, 1 or 2) within its time bound and memory bound; `npm run fuzz -- N` runs longer.
 */
test('300 mutated input files end in results or diagnostics: no internal error, crash, hang or runaway memory', () => {
  const save = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-fuzz-failures-'));
  const r = spawnSync(process.execPath, [path.join(ROOT, 'tools/dist/fuzz/main.js'), '300', '--seed', '20261124', '--jobs', '2', '--timeout', '60', '--save', save], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 900_000,
  });
  const failures = fs.readdirSync(save).filter((f) => f.endsWith('.txt')).map((f) => fs.readFileSync(path.join(save, f), 'utf8').slice(0, 1500));
  fs.rmSync(save, { recursive: true, force: true });
  if (r.status !== 0) throw new Error(`fuzz run failed (exit ${r.status}):\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-2000)}\n${failures.join('\n---\n')}`);
  expect(r.stdout).toMatch(/300 cases in \d+ s/);
  expect(r.stdout).toMatch(/no failures/);
}, 900_000);
