import * as path from 'node:path';
import { Command } from 'commander';
import { printGraph } from '@tilegraph/ir';
import { importOnnxFile } from '@tilegraph/frontend';
import { stderrReporter } from '../diagnostics.js';
import { checkInputFile, checkOutputFile, writeAtomic } from '../files.js';
import { positiveInt } from '../flags.js';
import { dimSizes } from '../modelflags.js';
import { emitDocument } from '../json.js';

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
    .option('--json', 'print the summary as one JSON document')
    .action((file: string, o: { output?: string; batchSize?: number; dim?: string[]; printDebuginfo?: boolean; json?: boolean }) => {
      checkInputFile(file, 'ONNX model file');
      if (o.output) checkOutputFile(o.output, '-o', [file]);
      const dims = dimSizes(o.dim) ?? {};
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
      if (!o.json) process.stdout.write(lines.join('\n') + '\n');
      if (o.output) {
        const text = printGraph(graph, { debugInfo: !!o.printDebuginfo });
        writeAtomic(o.output, text.endsWith('\n') ? text : text + '\n');
        if (!o.json) process.stdout.write(`  IR written to ${o.output}\n`);
      }
      if (o.json) {
        const type = (dtype: string, shape: readonly number[]) => ({ dtype, shape: [...shape] });
        emitDocument({
          model: graph.name,
          file,
          opset,
          import_ms: Math.round(ms * 1000) / 1000,
          inputs: graph.inputs().map((i) => ({ name: i.attrs['name'], ...type(i.result.type.dtype, i.result.type.shape) })),
          outputs: graph.outputs.map((x) => ({ name: x.name, ...type(x.value.type.dtype, x.value.type.shape) })),
          ops: graph.numOps,
          parameters: params.length,
          weights,
          op_counts: Object.fromEntries([...counts].sort((a, b) => b[1] - a[1])),
          ...(o.output ? { written: o.output } : {}),
        });
      }
    });
}
