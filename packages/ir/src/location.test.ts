import { callLoc, fileLoc, formatLocation, selectFrame } from './location.js';
import { error, renderDiagnostic } from './diagnostics.js';

describe('locations', () => {
  // an op made inside nn.tg's linear(), called from model.tg, called from a library wrapper
  const loc = callLoc(callLoc(fileLoc('std/nn.tg', 3, 9, 'linear'), fileLoc('model.tg', 10, 3, 'mlp')), fileLoc('/lib/site-packages/wrap.ts', 1, 1));

  it('picks the first frame not matching the excludes, like sourceLocationExcludes', () => {
    expect(formatLocation(loc)).toBe('std/nn.tg:3:9');
    expect(formatLocation(loc, ['nn.tg'])).toBe('model.tg:10:3');
    expect(formatLocation(loc, ['nn.tg', 'model'])).toBe('/lib/site-packages/wrap.ts:1:1');
  });
  it('falls back to the innermost frame when every frame is excluded', () => {
    expect(selectFrame(loc, ['.tg', '.ts'])?.file).toBe('std/nn.tg');
    expect(formatLocation({ frames: [] })).toBe('<unknown>');
  });
  it('names nodes for files without lines', () => {
    expect(formatLocation({ frames: [{ file: 'model.onnx', name: 'Gemm_0' }] })).toBe('model.onnx:Gemm_0');
  });
});

describe('diagnostics', () => {
  it('renders file:line:col, the source line and a caret, and the call stack', () => {
    const src = 'model m {\n  let y = x @ w\n}\n';
    const d = error('matmul: inner dimensions differ, [4,784] @ [128,10]', callLoc(fileLoc('m.tg', 2, 13), fileLoc('main.tg', 5, 1)));
    expect(renderDiagnostic(d, { sources: (f) => (f === 'm.tg' ? src : undefined) })).toBe(
      [
        'm.tg:2:13: error: matmul: inner dimensions differ, [4,784] @ [128,10]',
        '    let y = x @ w',
        '              ^',
        '  note: from main.tg:5:1',
      ].join('\n'),
    );
  });
  it('renders without a location or source', () => {
    expect(renderDiagnostic(error('no inputs', undefined, ['add an input']))).toBe('error: no inputs\n  note: add an input');
  });
});
