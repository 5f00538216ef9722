import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../../..');

/** An exported executable of the mlp example, made by `tilegraph compile -o` (through the executable cache). */
export function exportedSeeds(): { name: string; bytes: Uint8Array }[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-fuzz-exe-'));
  try {
    const file = path.join(dir, 'mlp.tgexe');
    const r = spawnSync(process.execPath, [path.join(HERE, '..', 'cli.js'), 'compile', path.join(ROOT, 'examples', 'mlp.tg'), '--pipeline', 'inference', '--batch-size', '2', '-o', file], { encoding: 'utf8', timeout: 600_000 });
    if (r.status !== 0) throw new Error(`building the executable seed failed:\n${r.stderr}`);
    return [{ name: 'mlp.tgexe', bytes: fs.readFileSync(file) }];
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
