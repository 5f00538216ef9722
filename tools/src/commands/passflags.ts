import { Command } from 'commander';
import { PassManagerOptions, TRAINING_PASSES } from '@tilegraph/passes';
import { UsageError } from '../diagnostics.js';

/** The compile-pipeline flags shared by ir, train and compile: IR dumps, verification, timing. */
export function registerPassFlags(cmd: Command): Command {
  return cmd
    .option('--print-ir-after <pass...>', 'print the IR after these passes')
    .option('--print-ir-after-all', 'print the IR after every pass')
    .option('--print-ir-after-change', 'print the IR after every pass that changed it')
    .option('--print-debuginfo', 'print source locations in IR dumps')
    .option('--no-verify-each', 'do not verify the IR after each pass')
    .option('--time-passes', 'print the time spent in each pass');
}

export function passFlags(o: Record<string, unknown>): { passes: PassManagerOptions; timePasses: boolean } {
  const after = (o['printIrAfter'] as string[] | undefined)?.flatMap((s) => s.split(',')).filter(Boolean);
  // a pass the pipeline does not have is a mistake on the command line (exit 2), found before any work
  const known = TRAINING_PASSES.map((p) => p.name);
  const unknown = (after ?? []).filter((n) => !known.includes(n));
  if (unknown.length) throw new UsageError(`--print-ir-after: no pass named ${unknown.map((n) => `'${n}'`).join(', ')} (passes: ${known.join(', ')})`);
  return {
    passes: {
      ...(after?.length ? { printIrAfter: after } : {}),
      printIrAfterAll: !!o['printIrAfterAll'],
      printIrAfterChange: !!o['printIrAfterChange'],
      debugInfo: !!o['printDebuginfo'],
      verify: o['verifyEach'] !== false,
    },
    timePasses: !!o['timePasses'],
  };
}
