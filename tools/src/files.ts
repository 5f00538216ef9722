import * as fs from 'node:fs';
import * as path from 'node:path';
import { GENERATED_FILES } from '@tilegraph/codegen-poplar';
import { writeFileAtomic } from '@tilegraph/runtime';
import { fileKind, realOrResolved, specialTreeOf } from '@tilegraph/frontend';
import { UsageError } from './diagnostics.js';

/** The real path of `p`, following links, or of its nearest existing parent joined with the rest. */
function resolved(p: string): string {
  const abs = path.resolve(p);
  try {
    return fs.realpathSync(abs);
  } catch {
    const parent = path.dirname(abs);
    return parent === abs ? abs : path.join(resolved(parent), path.basename(abs));
  }
}

/**
 * Checks an output file before any work starts: not one of the command's inputs, not a folder
 * or a special file (FIFO, device, socket), not `-`, and in an existing folder. Problems are
 * command-line errors (exit 2).
 */
export function checkOutputFile(file: string, flag: string, inputs: readonly string[]): void {
  if (file === '-') throw new UsageError(`${flag} -: this command writes to files only; give a file name`);
  const target = resolved(file);
  for (const input of inputs) {
    if (resolved(input) === target) throw new UsageError(`${flag} ${file} is an input of this command; write the output to another file`);
  }
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(file);
  } catch {
    st = undefined;
  }
  if (st?.isDirectory()) throw new UsageError(`${flag} ${file} is a folder; give a file name inside it`);
  if (st && !st.isFile()) throw new UsageError(`${flag} ${file} is not a regular file (a FIFO, device or socket); give a file name`);
  const dir = path.dirname(path.resolve(file));
  let ds: fs.Stats | undefined;
  try {
    ds = fs.statSync(dir);
  } catch {
    ds = undefined;
  }
  if (!ds) throw new UsageError(`${flag} ${file}: the folder ${dir} does not exist`);
  if (!ds.isDirectory()) throw new UsageError(`${flag} ${file}: ${dir} is not a folder`);
  // a probe file finds what permissions alone do not (read-only mounts, sysfs, root on NFS)
  const probe = path.join(dir, `.${path.basename(file)}.${process.pid}.probe`);
  try {
    fs.writeFileSync(probe, '', { flag: 'wx' });
    fs.rmSync(probe, { force: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'EROFS' ? 'is on a read-only file system' : code === 'ENOSPC' ? 'is on a full file system' : 'is not writable';
    throw new UsageError(`${flag} ${file}: the folder ${dir} ${why}; write the output elsewhere`);
  }
}

/**
 * Checks an input file before it is read: it must exist and be a regular file (a FIFO or device
 * would block or never end) whose real path is not under /proc, /sys or /dev (their files are the
 * system's state, e.g. /proc/self/environ, reached directly or through a link). Problems are
 * command-line errors (exit 2).
 */
export function checkInputFile(file: string, what: string): void {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    throw new UsageError(`no such file: ${file} (the ${what})`);
  }
  if (st.isDirectory()) throw new UsageError(`${file} is a folder, not ${/^[aeiouAEIOU]/.test(what) ? 'an' : 'a'} ${what}`);
  if (!st.isFile()) throw new UsageError(`${file} is not a regular file (${fileKind(st)}); give the ${what} as a file`);
  const special = specialTreeOf(file);
  if (special !== undefined) throw new UsageError(`${file} is not read: its real path ${realOrResolved(path.resolve(file))} is under ${special}, the system's state rather than a file (the ${what})`);
}

/** Files `tilegraph compile --emit-cpp` writes: a folder holding only these may be written again. */
export const EMITTED_FILES = GENERATED_FILES;

/**
 * Checks the folder of --emit-cpp before any work starts: a new folder, an empty one, or one that
 * holds only files tilegraph writes, unless `force` (then its files of those names are replaced).
 */
export function checkEmitFolder(dir: string, force: boolean, inputs: readonly string[]): void {
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(dir);
  } catch {
    st = undefined;
  }
  if (st && !st.isDirectory()) throw new UsageError(`--emit-cpp ${dir} is not a folder`);
  if (!st) {
    // made (with its parents) when the sources are written: check now that it can be
    checkCreatableFolder(dir, '--emit-cpp');
    return;
  }
  for (const name of EMITTED_FILES) checkOutputFile(path.join(dir, name), '--emit-cpp', inputs);
  if (force) return;
  const others = fs.readdirSync(dir).filter((f) => !(EMITTED_FILES as readonly string[]).includes(f));
  if (others.length) {
    throw new UsageError(`--emit-cpp ${dir} holds other files (${others.slice(0, 3).join(', ')}${others.length > 3 ? ', ...' : ''}); give an empty or new folder, or add --force to write tilegraph's files (${EMITTED_FILES.join(', ')}) there`);
  }
}

/** Why a folder could not be made or written (an errno code), in words. */
export function folderProblem(code: string | undefined): string {
  return code === 'EROFS' ? 'is on a read-only file system' : code === 'ENOSPC' ? 'is on a full file system' : code === 'ENOTDIR' ? 'is not a folder' : 'is not writable';
}

/**
 * Checks that the missing folder `dir` can be made with its parents: its nearest existing
 * ancestor is a folder in which a folder can be made (probed, so read-only mounts are found too).
 */
export function checkCreatableFolder(dir: string, flag: string): void {
  let at = path.resolve(dir);
  let st: fs.Stats | undefined;
  for (;;) {
    try {
      st = fs.statSync(at);
      break;
    } catch {
      const up = path.dirname(at);
      if (up === at) break;
      at = up;
    }
  }
  if (!st) throw new UsageError(`${flag} ${dir}: none of its parent folders exists`);
  if (!st.isDirectory()) throw new UsageError(`${flag} ${dir}: ${at} is not a folder, so the folder cannot be made`);
  const probe = path.join(at, `.tilegraph.${process.pid}.probe`);
  try {
    fs.mkdirSync(probe);
    fs.rmdirSync(probe);
  } catch (e) {
    throw new UsageError(`${flag} ${dir}: the folder ${at} ${folderProblem((e as NodeJS.ErrnoException).code)}, so the folder cannot be made there; write the output elsewhere`);
  }
}

/** Makes an output folder (with its parents); a failure is a command-line error naming the folder. */
export function makeOutputFolder(dir: string, flag: string): void {
  try {
    fs.mkdirSync(dir, { recursive: true });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new UsageError(`${flag} ${dir}: the folder cannot be made: ${folderProblem(err.code)} (${err.code ?? err.message})${err.path && err.path !== dir ? ` at ${err.path}` : ''}`);
  }
}

/** Writes a file atomically (the runtime's writer: temporary file, rename, cleaned up on failure). */
export const writeAtomic = writeFileAtomic;
