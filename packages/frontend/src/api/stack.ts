import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Frame, Location } from '@tilegraph/ir';

/** This directory: frames inside the builder API are never the user's. */
const API_DIR = path.dirname(fileURLToPath(import.meta.url));
/** The API's own modules (tests beside them are user code). */
const API_MODULES = new Set(['builder', 'custom', 'stack', 'index']);
/** Most frames kept per location (the innermost ones). */
export const MAX_FRAMES = 16;

const FRAME_LINE = /^\s*at (?:(?:async )?(.*?) \()?(.*?):(\d+):(\d+)\)?\s*$/;

function toPath(file: string): string {
  if (file.startsWith('file://')) {
    try {
      return fileURLToPath(file);
    } catch {
      return file;
    }
  }
  return file;
}

/** Whether `file` is one of the API's own modules in `dir`. */
function apiModule(file: string, dir: string): boolean {
  return path.dirname(file) === dir && API_MODULES.has(path.basename(file).replace(/\.(?:ts|js|mjs)$/, ''));
}

/**
 * Parses a V8 stack trace (`new Error().stack`) into frames, innermost first. Frames in Node's
 * own modules and in the builder API's modules (in the directories `skipDirs`) are dropped.
 */
export function parseStack(stack: string, skipDirs: readonly string[] = [API_DIR]): Frame[] {
  const frames: Frame[] = [];
  for (const line of stack.split('\n').slice(1)) {
    const m = FRAME_LINE.exec(line);
    if (!m) continue;
    const file = toPath(m[2]!);
    if (file.startsWith('node:') || file === '<anonymous>' || file === 'native') continue;
    if (skipDirs.some((d) => apiModule(file, d))) continue;
    const fn = m[1] && !m[1].startsWith('Object.<anonymous>') && m[1] !== '<anonymous>' ? m[1].replace(/^new /, '') : undefined;
    const f: Frame = fn ? { file, line: Number(m[3]), col: Number(m[4]), fn } : { file, line: Number(m[3]), col: Number(m[4]) };
    frames.push(f);
    if (frames.length >= MAX_FRAMES) break;
  }
  return frames;
}

/** The JavaScript call stack of the caller, outside the builder API, as a Location. */
export function callerLocation(): Location {
  const saved = Error.stackTraceLimit;
  Error.stackTraceLimit = 64;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = saved;
  return { frames: parseStack(stack) };
}
