import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { DiagnosticError, Tensor, error } from '@tilegraph/ir';
import { loadWeights, saveWeights } from '@tilegraph/runtime';
import { UsageError } from '../diagnostics.js';
import { checkInputFile, writeAtomic } from '../files.js';

/**
 * Training checkpoints: a folder per checkpoint (`step-00000010`) holding the weights
 * (weights.safetensors), the optimizer's state on the device (optimizer.safetensors: momenta,
 * step counters, accumulators) and the counters of the loop (state.json: step, epoch and the
 * position in it; the data order follows from the seed and the epoch). Each is written into a
 * temporary folder renamed into place, so a crash never leaves half a checkpoint.
 */

export const CHECKPOINT_FORMAT = 1;

export interface CheckpointState {
  readonly format: number;
  readonly model: string;
  /** Optimizer steps done. */
  readonly step: number;
  /** The epoch the next step reads from (0-based) and the runs of it already done. */
  readonly epoch: number;
  readonly runInEpoch: number;
  /** The data order: shuffled with this seed (a new order per epoch), or in file order. */
  readonly seed: number;
  readonly shuffle: boolean;
  readonly combinedBatchSize: number;
  readonly dataLength: number;
  readonly data: string;
  readonly optimizer: { readonly type: string; readonly hyper: Readonly<Record<string, number>> };
  readonly backend: string;
  /** The model's random-number state (rngState): absent in checkpoints written before it was kept. */
  readonly rng?: { readonly seed: number; readonly counter: number };
}

export interface Checkpoint {
  readonly dir: string;
  readonly state: CheckpointState;
  readonly weights: Record<string, Tensor>;
  readonly optimizer: Record<string, Tensor>;
}

const stepFolder = (step: number) => `step-${String(step).padStart(8, '0')}`;

/** Writes a checkpoint into `dir/step-NNNNNNNN` (replacing one of the same step); returns its folder. */
export function writeCheckpoint(dir: string, state: CheckpointState, weights: Readonly<Record<string, Tensor>>, optimizer: Readonly<Record<string, Tensor>>): string {
  fs.mkdirSync(dir, { recursive: true });
  const final = path.join(dir, stepFolder(state.step));
  const tag = `${process.pid}.${randomBytes(4).toString('hex')}`;
  const tmp = path.join(dir, `.${stepFolder(state.step)}.${tag}.tmp`);
  const old = path.join(dir, `.${stepFolder(state.step)}.${tag}.old`);
  try {
    fs.mkdirSync(tmp);
    const meta = { producer: 'tilegraph', model: state.model, step: String(state.step) };
    saveWeights(path.join(tmp, 'weights.safetensors'), weights, { metadata: meta });
    saveWeights(path.join(tmp, 'optimizer.safetensors'), optimizer, { metadata: meta });
    writeAtomic(path.join(tmp, 'state.json'), JSON.stringify(state, null, 2) + '\n');
    // a folder cannot be renamed over a non-empty one: move the old one aside first
    if (fs.existsSync(final)) fs.renameSync(final, old);
    fs.renameSync(tmp, final);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    if (fs.existsSync(old) && !fs.existsSync(final)) fs.renameSync(old, final);
    if (e instanceof DiagnosticError) throw e;
    throw new DiagnosticError(error(`cannot write the checkpoint ${final}: ${(e as Error).message.replace(/^[A-Z]+: /, '')}`, undefined, ['check the path, its permissions and the free space']));
  }
  fs.rmSync(old, { recursive: true, force: true });
  return final;
}

/** The files of a checkpoint folder, all read when it is resumed. */
export const CHECKPOINT_FILES = ['state.json', 'weights.safetensors', 'optimizer.safetensors'] as const;

/**
 * The checkpoint folder `p` names: a checkpoint itself, or the newest in a --checkpoint-dir. Its
 * files are checked before any work: each must be a regular file (a FIFO would hang the read), or
 * the command line is wrong (exit 2).
 */
export function findCheckpoint(p: string): string {
  const dir = findCheckpointFolder(p);
  for (const f of CHECKPOINT_FILES) checkInputFile(path.join(dir, f), `checkpoint's ${f} (--resume)`);
  return dir;
}

function findCheckpointFolder(p: string): string {
  let st: fs.Stats;
  try {
    st = fs.statSync(p);
  } catch {
    throw new UsageError(`no such checkpoint: ${p} (--resume)`);
  }
  if (!st.isDirectory()) throw new UsageError(`--resume ${p}: give a checkpoint folder (one holding state.json) or a --checkpoint-dir`);
  if (fs.existsSync(path.join(p, 'state.json'))) return p;
  const steps = fs
    .readdirSync(p)
    .filter((f) => /^step-\d+$/.test(f) && fs.existsSync(path.join(p, f, 'state.json')))
    .sort();
  if (!steps.length) throw new UsageError(`--resume ${p}: no checkpoint in it (no state.json, no step-N folder)`);
  return path.join(p, steps[steps.length - 1]!);
}

/** Reads a checkpoint folder; a malformed one is a diagnostic naming the file. */
export function readCheckpoint(dir: string): Checkpoint {
  const file = path.join(dir, 'state.json');
  let state: CheckpointState;
  try {
    state = JSON.parse(fs.readFileSync(file, 'utf8')) as CheckpointState;
  } catch (e) {
    throw new DiagnosticError(error(`${file}: not a readable checkpoint state (${(e as Error).message})`));
  }
  const ints = ['step', 'epoch', 'runInEpoch', 'seed', 'combinedBatchSize', 'dataLength'] as const;
  const bad = typeof state !== 'object' || state === null ? ['not an object'] : ints.filter((k) => !Number.isSafeInteger(state[k]) || state[k] < 0).map((k) => `'${k}' is not a non-negative integer`);
  if (!bad.length && state.format !== CHECKPOINT_FORMAT) bad.push(`format ${JSON.stringify(state.format)}; this tilegraph reads format ${CHECKPOINT_FORMAT}`);
  if (!bad.length && typeof state.shuffle !== 'boolean') bad.push("'shuffle' is not true or false");
  if (!bad.length && state.rng !== undefined && (typeof state.rng !== 'object' || state.rng === null || !Number.isSafeInteger(state.rng.seed) || !Number.isSafeInteger(state.rng.counter) || state.rng.counter < 0)) {
    bad.push("'rng' is not {seed, counter} with integers");
  }
  if (bad.length) throw new DiagnosticError(error(`${file}: not a usable checkpoint state`, undefined, bad));
  return { dir, state, weights: loadWeights(path.join(dir, 'weights.safetensors')), optimizer: loadWeights(path.join(dir, 'optimizer.safetensors')) };
}
