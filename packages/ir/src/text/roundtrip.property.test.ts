import fc from 'fast-check';
import { Tensor, tensorsIdentical } from '../tensor.js';
import { locationsEqual } from '../location.js';
import { arbitraryGraph } from '../testing/arbitrary.js';
import { parseGraph } from './parser.js';
import { printGraph } from './printer.js';

describe('text round trip (property)', () => {
  it('parse(print(g)) prints identically, with locations', () => {
    fc.assert(
      fc.property(arbitraryGraph(), (g) => {
        const text = printGraph(g, { debugInfo: true });
        expect(printGraph(parseGraph(text), { debugInfo: true })).toBe(text);
      }),
      { numRuns: 300 },
    );
  });

  it('parse(print(g)) prints identically without locations', () => {
    fc.assert(
      fc.property(arbitraryGraph(), (g) => {
        const text = printGraph(g);
        expect(printGraph(parseGraph(text))).toBe(text);
      }),
      { numRuns: 100 },
    );
  });

  it('keeps locations, scopes, annotations and constant bits of every op', () => {
    fc.assert(
      fc.property(arbitraryGraph(), (g) => {
        const back = parseGraph(printGraph(g, { debugInfo: true }));
        const order = g.topologicalOrder()!;
        expect(back.ops.map((o) => o.kind)).toEqual(order.map((o) => o.kind));
        order.forEach((op, i) => {
          const copy = back.ops[i]!;
          expect(locationsEqual(copy.loc, op.loc)).toBe(true);
          expect(copy.scope).toBe(op.scope);
          expect(copy.annotations).toEqual(op.annotations);
          expect(copy.results.map((r) => r.type)).toEqual(op.results.map((r) => r.type));
          if (op.kind === 'constant') {
            expect(tensorsIdentical(copy.attrs['value'] as Tensor, op.attrs['value'] as Tensor)).toBe(true);
          }
        });
        expect(back.outputs.map((o) => o.name)).toEqual(g.outputs.map((o) => o.name));
      }),
      { numRuns: 100 },
    );
  });
});
