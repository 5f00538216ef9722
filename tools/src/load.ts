import * as fs from 'node:fs';
import * as path from 'node:path';
import { DiagnosticError, Graph, error, noteOpenedSource, parseGraph } from '@tilegraph/ir';
import { importOnnxFile, loadModelFile } from '@tilegraph/frontend';
import { UsageError, stderrReporter } from './diagnostics.js';
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
        // --model naming no model of the file is a mistake on the command line (exit 2), not in the model
        const noSuch = e instanceof DiagnosticError && opts.model !== undefined ? e.diagnostics.find((d) => d.message.includes(`no model is named`)) : undefined;
        if (noSuch) throw new UsageError(`--model ${opts.model}: ${noSuch.message}`);
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
      const text = fs.readFileSync(file, 'utf8');
      // diagnostics may quote it (and only it: its loc()s name files this command never opens)
      noteOpenedSource(file, text);
      return parseGraph(text, file);
    }
    default:
      // the file named on the command line is not a model: a command-line error, like a missing file
      throw new UsageError(`cannot tell the kind of model from the extension of ${file}: use .tg (model language), .onnx (ONNX) or .tgir (text IR)`);
  }
}
