import * as fs from 'node:fs';
import * as path from 'node:path';
import { Tensor, formatType } from '@tilegraph/ir';
import { UsageError } from '../diagnostics.js';
import { writeAtomic } from '../files.js';
import { encodeNpz, outputFileName, tensorToJson } from './arrays.js';
import { encodeNpy } from './npy.js';

/**
 * Checks an output folder before any work: an existing folder, or a new one whose parent exists;
 * writable (probed). Problems are command-line errors (exit 2).
 */
export function checkOutputDir(dir: string, flag: string): void {
  const isDir = (p: string): boolean | undefined => {
    try {
      return fs.statSync(p).isDirectory();
    } catch {
      return undefined;
    }
  };
  const exists = isDir(dir);
  if (exists === false) throw new UsageError(`${flag} ${dir} is not a folder`);
  const where = exists ? dir : path.dirname(path.resolve(dir));
  if (!exists && !isDir(where)) throw new UsageError(`${flag} ${dir}: the folder ${where} does not exist`);
  // a probe file finds what permissions alone do not (read-only mounts, root on NFS)
  const probe = path.join(where, `.tilegraph.${process.pid}.probe`);
  try {
    fs.writeFileSync(probe, '', { flag: 'wx' });
    fs.rmSync(probe, { force: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(`${flag} ${dir}: the folder ${where} ${code === 'EROFS' ? 'is on a read-only file system' : 'is not writable'}; write the outputs elsewhere`);
  }
}

/** Writes outputs as one .npz file. */
export function writeNpz(file: string, outputs: Readonly<Record<string, Tensor>>): void {
  writeAtomic(file, encodeNpz(outputs));
}

/** Writes one .npy file per output into `dir` (made if missing); returns the files by output name. */
export function writeNpyFolder(dir: string, outputs: Readonly<Record<string, Tensor>>): Record<string, string> {
  fs.mkdirSync(dir, { recursive: true });
  const taken = new Set<string>();
  const files: Record<string, string> = {};
  for (const [name, t] of Object.entries(outputs)) {
    const file = path.join(dir, outputFileName(name, taken));
    writeAtomic(file, encodeNpy(t));
    files[name] = file;
  }
  return files;
}

/** Tensors by name as the JSON of `run --json`: dtype, shape and nested data. */
export function outputsJson(outputs: Readonly<Record<string, Tensor>>): Record<string, { dtype: string; shape: number[]; data: unknown }> {
  return Object.fromEntries(Object.entries(outputs).map(([name, t]) => [name, { dtype: t.dtype, shape: [...t.shape], data: tensorToJson(t) }]));
}

/** `name f32[4,10]` lines for outputs written to files. */
export function describeOutputs(outputs: Readonly<Record<string, Tensor>>): string {
  return Object.entries(outputs)
    .map(([name, t]) => `${name} ${formatType(t)}`)
    .join(', ');
}
