import { Command } from 'commander';
import { PassManagerOptions } from '@tilegraph/passes';

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
