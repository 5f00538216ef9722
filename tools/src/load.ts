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
  /** Which model of a model-language file (`--model NAME`), when it declares several. */
  model?: string;
  /** Sizes of an ONNX model's named symbolic dimensions (`--dim name=size`). */
  dims?: Readonly<Record<string, number>>;
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
  // a flag that cannot apply to this kind of file says so, rather than being dropped
  const notFor = (flag: string, what: string, kind: string) => new UsageError(`${flag} ${what}; ${file} is ${kind}`);
  if (ext !== '.tg' && opts.model !== undefined) throw notFor('--model', 'chooses among the models of a model-language (.tg) file', ext === '.onnx' ? 'an ONNX model (one graph)' : 'a text IR file (one module)');
  if (ext !== '.onnx' && opts.dims && Object.keys(opts.dims).length) throw notFor('--dim', 'sizes symbolic dimensions of an ONNX model', ext === '.tg' ? 'a model-language file (set its parameters with --arg name=value)' : 'a text IR file, whose shapes are fixed');
  if (ext === '.tgir' && opts.args && Object.keys(opts.args).length) throw notFor('--arg', 'sets parameters of model-language (.tg) models', 'a text IR file, whose shapes are fixed');
  if (ext === '.tgir' && opts.batchSize !== undefined) throw notFor('--batch-size', 'sizes the batch of a .tg or ONNX model', 'a text IR file, whose shapes are fixed');
  switch (ext) {
    case '.tg':
      try {
        // the model's `batch` parameter, when the command line sets one
        return loadModelFile(file, {
          args: { ...(opts.batchSize !== undefined ? { batch: opts.batchSize } : {}), ...opts.args },
          ...(opts.model !== undefined ? { model: opts.model } : {}),
          ...(opts.importPaths ? { importPaths: opts.importPaths } : {}),
        });
      } catch (e) {
        // the elaborator's "choose one" is an API option; on the command line it is a flag
        if (e instanceof DiagnosticError && e.diagnostics.some((d) => d.message.includes('declares several models'))) {
          throw new DiagnosticError(e.diagnostics.map((d) => (d.message.includes('declares several models') ? { ...d, notes: [...(d.notes ?? []), 'choose one with --model NAME'] } : d)));
        }
        throw e;
      }
    case '.onnx': {
      if (opts.args && Object.keys(opts.args).length) throw new UsageError(`--arg sets parameters of model-language (.tg) models; ${file} is an ONNX model (size its symbolic dimensions with --dim name=size)`);
      let imported;
      try {
        imported = importOnnxFile(file, { ...(opts.batchSize !== undefined ? { batchSize: opts.batchSize } : {}), ...(opts.dims ? { dims: opts.dims } : {}) });
      } catch (e) {
        // the importer's hint names its API option; on the command line it is a flag
        if (e instanceof DiagnosticError && e.diagnostics.some((d) => d.message.includes('symbolic dimension'))) {
          throw new DiagnosticError(e.diagnostics.map((d) => (d.message.includes('symbolic dimension') ? { ...d, notes: ['give the batch size with --batch-size N, and other symbolic dimensions with --dim name=size'] } : d)));
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
