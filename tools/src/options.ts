import * as fs from 'node:fs';
import { checkInputFile } from './files.js';
import { Options } from '@tilegraph/frontend';
import { noteOpenedSource } from '@tilegraph/ir';
import { OptimizerType } from '@tilegraph/passes';
import { UsageError } from './diagnostics.js';

/** Loads --options FILE: JSON (Options.toJSON form) or PopTorch-style setters, one a line. */
export function loadOptionsFile(file: string): Options {
  checkInputFile(file, 'options file');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`${file}: cannot read the options file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  // diagnostics may quote it: the command opened it
  noteOpenedSource(file, text);
  if (file.endsWith('.json')) {
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch (e) {
      throw new UsageError(`${file}: not valid JSON: ${(e as Error).message}`);
    }
    return Options.fromJSON(obj as never);
  }
  return new Options().loadFromString(text, file);
}

/** Optimizers by their command-line names. */
export const OPTIMIZER_FLAGS: Readonly<Record<string, OptimizerType>> = { sgd: 'SGD', adam: 'Adam', adamw: 'AdamW', rmsprop: 'RMSprop', lamb: 'LAMB' };

/** The optimizer named by --optimizer (case-insensitive). */
export function optimizerFromFlag(name: string): OptimizerType {
  const t = OPTIMIZER_FLAGS[name.toLowerCase()];
  if (!t) throw new UsageError(`unknown optimizer '${name}' (choose ${Object.keys(OPTIMIZER_FLAGS).join(', ')})`);
  return t;
}
