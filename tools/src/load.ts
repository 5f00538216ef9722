import * as fs from 'node:fs';
import * as path from 'node:path';
import { DiagnosticError, Graph, error, parseGraph } from '@tilegraph/ir';
import { importOnnxFile, loadModelFile } from '@tilegraph/frontend';
import { UsageError, allowQuoting, stderrReporter } from './diagnostics.js';
import { checkInputFile } from './files.js';

export interface LoadOptions {
  /** Micro-batch size: symbolic batch dims of ONNX inputs, the `batch` parameter of a .tg model. */
  batchSize?: number;
  excludes?: readonly string[];
  /** Values of a model-language model's parameters (`--arg name=value`). */
  args?: Readonly<Record<string, number | boolean | string>>;
  /** Folders a model-language model may import from besides its own folder and the standard library. */
  importPaths?: readonly string[];
}

const MAX_TEXT_IR_BYTES = 256 * 2 ** 20;

/**
 * Loads a model by file extension: .tg (model language), .onnx (ONNX import) or .tgir (text IR).
 * Warnings are printed; errors are thrown as DiagnosticError.
 */
export function loadModel(file: string, opts: LoadOptions = {}): Graph {
  checkInputFile(file, 'model file');
  // diagnostics may quote the model's own folder (and its import paths), nothing else
  allowQuoting(path.dirname(path.resolve(file)));
  for (const d of opts.importPaths ?? []) allowQuoting(d);
  const ext = path.extname(file).toLowerCase();
  switch (ext) {
    case '.tg':
      // the model's `batch` parameter, when the command line sets one
      return loadModelFile(file, { args: { ...(opts.batchSize !== undefined ? { batch: opts.batchSize } : {}), ...opts.args }, ...(opts.importPaths ? { importPaths: opts.importPaths } : {}) });
    case '.onnx': {
      if (opts.args && Object.keys(opts.args).length) throw new UsageError(`--arg sets parameters of model-language (.tg) models; ${file} is an ONNX model`);
      let imported;
      try {
        imported = importOnnxFile(file, opts.batchSize !== undefined ? { batchSize: opts.batchSize } : {});
      } catch (e) {
        // the importer's hint names its API option; on the command line it is a flag
        if (e instanceof DiagnosticError && e.diagnostics.some((d) => d.message.includes('symbolic dimension'))) {
          throw new DiagnosticError(e.diagnostics.map((d) => (d.message.includes('symbolic dimension') ? { ...d, notes: ['give the batch size with --batch-size N'] } : d)));
        }
        throw e;
      }
      const { graph, diagnostics } = imported;
      stderrReporter(opts.excludes).report(diagnostics);
      return graph;
    }
    case '.tgir': {
      // text IR is parsed whole: a size far beyond any real module is a mistake, not a model
      const size = fs.statSync(file).size;
      if (size > MAX_TEXT_IR_BYTES) throw new DiagnosticError(error(`${file}: ${size} bytes is more than the ${MAX_TEXT_IR_BYTES / 2 ** 20} MiB a text IR file may have`, undefined, ['keep large weights out of the text IR: import the ONNX model, or load them with --weights']));
      return parseGraph(fs.readFileSync(file, 'utf8'), file);
    }
    default:
      throw new DiagnosticError(
        error(`cannot tell the kind of model from the extension of ${file}`, undefined, ['use .tg (model language), .onnx (ONNX) or .tgir (text IR)']),
      );
  }
}
