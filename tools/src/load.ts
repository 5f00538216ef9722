import * as fs from 'node:fs';
import * as path from 'node:path';
import { DiagnosticError, Graph, error, parseGraph } from '@tilegraph/ir';
import { importOnnxFile, loadModelFile } from '@tilegraph/frontend';
import { stderrReporter } from './diagnostics.js';

export interface LoadOptions {
  /** Micro-batch size: symbolic batch dims of ONNX inputs, the `batch` parameter of a .tg model. */
  batchSize?: number;
  excludes?: readonly string[];
}

/**
 * Loads a model by file extension: .tg (model language), .onnx (ONNX import) or .tgir (text IR).
 * Warnings are printed; errors are thrown as DiagnosticError.
 */
export function loadModel(file: string, opts: LoadOptions = {}): Graph {
  if (!fs.existsSync(file)) throw new DiagnosticError(error(`no such file: ${file}`));
  if (fs.statSync(file).isDirectory()) throw new DiagnosticError(error(`${file} is a folder, not a model file`));
  const ext = path.extname(file).toLowerCase();
  switch (ext) {
    case '.tg':
      // the model's `batch` parameter, when the command line sets one
      return loadModelFile(file, opts.batchSize !== undefined ? { args: { batch: opts.batchSize } } : {});
    case '.onnx': {
      const { graph, diagnostics } = importOnnxFile(file, opts.batchSize !== undefined ? { batchSize: opts.batchSize } : {});
      stderrReporter(opts.excludes).report(diagnostics);
      return graph;
    }
    case '.tgir':
      return parseGraph(fs.readFileSync(file, 'utf8'), file);
    default:
      throw new DiagnosticError(
        error(`cannot tell the kind of model from the extension of ${file}`, undefined, ['use .tg (model language), .onnx (ONNX) or .tgir (text IR)']),
      );
  }
}
