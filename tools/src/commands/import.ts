import * as path from 'node:path';
import { Command } from 'commander';
import { printGraph } from '@tilegraph/ir';
import { importOnnxFile } from '@tilegraph/frontend';
import { UsageError, stderrReporter } from '../diagnostics.js';
import { checkInputFile, checkOutputFile, writeAtomic } from '../files.js';
import { positiveInt } from '../flags.js';

/** `tilegraph import model.onnx`: ONNX to tilegraph IR, with a summary of what was imported. */
export function registerImport(program: Command): void {
  program
    .command('import')
    .description('import an ONNX model: print a summary, and write its text IR with -o')
    .argument('<model.onnx>', 'ONNX model file (external data is read from its folder)')
    .option('-o, --output <file>', 'write the text IR (.tgir) here')
    .option('--batch-size <n>', 'size of symbolic batch dimensions', positiveInt)
    .option('--dim <name=size...>', 'sizes of other symbolic dimensions by name')
    .option('--print-debuginfo', 'include source locations in the written IR')
    .action((file: string, o: { output?: string; batchSize?: number; dim?: string[]; printDebuginfo?: boolean }) => {
      checkInputFile(file, 'ONNX model file');
      if (o.output) checkOutputFile(o.output, '-o', [file]);
      const dims: Record<string, number> = {};
      for (const d of o.dim ?? []) {
        const m = /^([^=]+)=(\d+)$/.exec(d);
        if (!m || !Number.isSafeInteger(Number(m[2])) || Number(m[2]) < 1) throw new UsageError(`--dim expects name=size with a positive integer size, got '${d}'`);
        dims[m[1]!] = Number(m[2]);
      }
      const t0 = performance.now();
      const { graph, diagnostics, opset } = importOnnxFile(file, { ...(o.batchSize !== undefined ? { batchSize: o.batchSize } : {}), dims });
      const ms = performance.now() - t0;
      stderrReporter().report(diagnostics);
      const params = graph.parameters();
      const weights = params.reduce((n, p) => n + p.result.type.shape.reduce((a, d) => a * d, 1), 0);
      const counts = new Map<string, number>();
      for (const op of graph.ops) counts.set(op.kind, (counts.get(op.kind) ?? 0) + 1);
      const lines = [
        `${path.basename(file)}: opset ${opset}, imported in ${ms.toFixed(0)} ms`,
        `  inputs:  ${graph.inputs().map((i) => `${i.attrs['name']} ${i.result.type.dtype}[${i.result.type.shape}]`).join(', ') || 'none'}`,
        `  outputs: ${graph.outputs.map((x) => `${x.name} ${x.value.type.dtype}[${x.value.type.shape}]`).join(', ')}`,
        `  ${graph.numOps} ops, ${params.length} parameters (${weights} weights)`,
        `  ops: ${[...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', ')}`,
      ];
      process.stdout.write(lines.join('\n') + '\n');
      if (o.output) {
        const text = printGraph(graph, { debugInfo: !!o.printDebuginfo });
        writeAtomic(o.output, text.endsWith('\n') ? text : text + '\n');
        process.stdout.write(`  IR written to ${o.output}\n`);
      }
    });
}
