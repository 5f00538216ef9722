import { Command } from 'commander';
import { UsageError } from './diagnostics.js';
import { positiveInt } from './flags.js';
import { LoadOptions } from './load.js';

/**
 * The flags that say which model a file holds and how to size it, the same on every command that
 * opens a model: --model and --arg for model-language files, --dim for ONNX, --batch-size for both.
 */
export function registerModelFlags(cmd: Command, batchHelp = "micro-batch size: symbolic batch dimensions (ONNX) or the `batch` parameter (.tg)"): Command {
  return cmd
    .option('--model <name>', 'the model to use when a model-language file declares several')
    .option('--arg <name=value...>', 'a parameter of a model-language model (numbers, true/false or text), e.g. --arg layers=2 ipus=1')
    .option('--batch-size <n>', batchHelp, positiveInt)
    .option('--dim <name=size...>', 'sizes of symbolic dimensions of an ONNX model by name, e.g. --dim seq=128')
    .option('--import-path <dir...>', 'folders a .tg model may import from besides its own folder and the standard library');
}

/** `--arg name=value` values: numbers, booleans, or text. */
export function modelArgs(list: readonly string[] | undefined): Record<string, number | boolean | string> | undefined {
  if (!list?.length) return undefined;
  const out: Record<string, number | boolean | string> = {};
  for (const a of list) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(a);
    if (!m) throw new UsageError(`--arg ${a}: expected name=value`);
    const v = m[2]!;
    out[m[1]!] = v === 'true' ? true : v === 'false' ? false : v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : v;
  }
  return out;
}

/** `--dim name=size`: sizes of named symbolic dimensions. */
export function dimSizes(list: readonly string[] | undefined): Record<string, number> | undefined {
  if (!list?.length) return undefined;
  const out: Record<string, number> = {};
  for (const d of list) {
    const m = /^([^=]+)=(\d+)$/.exec(d);
    if (!m || !Number.isSafeInteger(Number(m[2])) || Number(m[2]) < 1) throw new UsageError(`--dim expects name=size with a positive integer size, got '${d}'`);
    out[m[1]!] = Number(m[2]);
  }
  return out;
}

/** The load options the model flags give (parsed commander values). */
export function modelFlagsOf(o: Record<string, unknown>): LoadOptions {
  const args = modelArgs(o['arg'] as string[] | undefined);
  const dims = dimSizes(o['dim'] as string[] | undefined);
  const dirs = o['importPath'] as string[] | undefined;
  return {
    ...(o['batchSize'] !== undefined ? { batchSize: o['batchSize'] as number } : {}),
    ...(o['model'] !== undefined ? { model: o['model'] as string } : {}),
    ...(args ? { args } : {}),
    ...(dims ? { dims } : {}),
    ...(dirs?.length ? { importPaths: dirs } : {}),
  };
}

/** The model flags that make no sense for an exported executable, whose model and sizes are fixed. */
export function refuseModelFlagsForExecutable(o: Record<string, unknown>, file: string): void {
  const given = [['model', '--model'], ['arg', '--arg'], ['batchSize', '--batch-size'], ['dim', '--dim'], ['importPath', '--import-path']].filter(([k]) => o[k!] !== undefined).map(([, f]) => f);
  if (given.length) throw new UsageError(`${given.join(', ')}: ${file} is an exported executable; its model and sizes were fixed when it was built (compile -o)`);
}
