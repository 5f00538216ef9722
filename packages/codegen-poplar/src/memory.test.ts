import fc from 'fast-check';
import { DiagnosticError, GraphBuilder, Module, collectVariables, execute, fileLoc, repeat, seq, streamIn } from '@tilegraph/ir';
import { generatePoplar } from './generate.js';
import { Allocation, AllocationKind, GC200, chooseMappingOffset, linearMapping, sweepTiles } from './memory.js';

function moduleOf(b: GraphBuilder): Module {
  const graphs = new Map([['forward', b.graph]]);
  const inputs = b.graph.inputs().map((o) => o.attrs['name'] as string);
  return { name: 'm', graphs, program: repeat(1, seq(streamIn(inputs), execute('forward'))), replicationFactor: 1, variables: collectVariables(graphs) };
}

function diagnosticOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(DiagnosticError);
    return (e as Error).message;
  }
  throw new Error('expected a diagnostic');
}

const ZEROS = { kind: 'init', fn: 'zeros', args: {} } as const;

describe('per-tile memory plan', () => {
  test('linear mapping: equal runs of whole grains, at least the minimum per tile', () => {
    // 1000 floats, grain 2, min 32: 500 grains over 1472 tiles is 1 grain each, raised to 32 → 32 tiles
    expect(linearMapping(1000, 1472, 2, 32)).toEqual({ perTile: 32, tilesUsed: 32 });
    // 1e6 elements: 5e5 grains / 1472 tiles = 339.67 → 340 grains = 680 elements per tile, 1471 tiles
    expect(linearMapping(1_000_000, 1472, 2, 32)).toEqual({ perTile: 680, tilesUsed: 1471 });
    expect(linearMapping(0, 1472, 2, 32)).toEqual({ perTile: 0, tilesUsed: 0 });
  });

  test('the sweep of live ranges: per tile, what is always live and the peak of the rest (and when), as a count at each allocation finds', () => {
    const T = 16;
    const allocation = fc.record({
      kind: fc.constantFrom<AllocationKind>('state', 'activation', 'temporary', 'vertices'),
      ipu: fc.integer({ min: 0, max: 1 }),
      offset: fc.integer({ min: 0, max: T - 1 }),
      elements: fc.integer({ min: 0, max: 60 }),
      perTile: fc.integer({ min: 1, max: 9 }),
      flat: fc.constantFrom(0, 0, 12),
      first: fc.integer({ min: 0, max: 20 }),
      length: fc.integer({ min: 0, max: 10 }),
    });
    fc.assert(
      fc.property(fc.array(allocation, { maxLength: 25 }), (specs) => {
        const buffers = specs.map((a, id) => {
          const tilesUsed = Math.min(T, Math.ceil(a.elements / a.perTile));
          const b = new Allocation(id, a.kind, { ipu: a.ipu, offset: a.offset, perTile: a.perTile, tilesUsed, elements: Math.min(a.elements, tilesUsed * a.perTile), bytesPerElement: 4 }, `b${id}`, undefined, a.flat);
          b.first = a.first;
          b.last = a.first + a.length;
          return b;
        });
        const got = sweepTiles(buffers, 2, T);
        for (let ipu = 0; ipu < 2; ipu++) {
          const mine = buffers.filter((b) => b.span.ipu === ipu && b.span.tilesUsed > 0);
          const times = [...new Set(mine.filter((b) => !b.alwaysLive).map((b) => b.first))].sort((x, y) => x - y);
          for (let tile = 0; tile < T; tile++) {
            expect(got.always[ipu]![tile]).toBe(mine.filter((b) => b.alwaysLive).reduce((n, b) => n + b.bytesOn(tile, T), 0));
            let peak = 0;
            let when = 0;
            for (const t of times) {
              const live = mine.filter((b) => !b.alwaysLive && b.first <= t && b.last >= t).reduce((n, b) => n + b.bytesOn(tile, T), 0);
              if (live > peak) [peak, when] = [live, t];
            }
            expect([got.peak[ipu]![tile], got.peakTime[ipu]![tile]]).toEqual([peak, when]);
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  test('the PopLibs result offset is FNV-1a of the dimensions, as poplar-host computes it', () => {
    // FNV-1a over the four low bytes of each dimension: 04 00 00 00 08 00 00 00
    let h = 0x811c9dc5;
    for (const byte of [4, 0, 0, 0, 8, 0, 0, 0]) h = Math.imul(h ^ byte, 0x01000193) >>> 0;
    expect(chooseMappingOffset(1472, [4, 8])).toBe(h % 1472);
    expect(chooseMappingOffset(1472, [4, 8])).not.toBe(chooseMappingOffset(1472, [8, 4]));
  });

  test('small tensors start where the last one ended instead of piling up on tile 0', () => {
    const b = new GraphBuilder('many');
    const x = b.input('x', 'float32', [4]);
    // 400 biases of 16 floats: one tile each (at least 32 floats per tile)
    let y = x;
    for (let i = 0; i < 400; i++) y = b.op('add', [y, b.parameter(`b${i}`, 'float32', [4], ZEROS)]);
    b.output('y', y);
    const { plan } = generatePoplar(moduleOf(b));
    // mapped from tile 0 every time, tile 0 would hold all 400 × 16 bytes
    expect(plan.memory.perIpu[0]!.maxTileAlwaysLive).toBeLessThan(400 * 16);
    const offsets = [...generatePoplar(moduleOf(b)).files['host.cpp'].matchAll(/\{"b\d+", \d+, \d+, 0, (\d+), kOnChip\}/g)].map((m) => Number(m[1]));
    expect(offsets.slice(0, 3)).toEqual([0, 1, 2]);
    expect(new Set(offsets).size).toBe(400);
  });

  test('tensors that are never live together share memory: a chain keeps two activations, not all', () => {
    const b = new GraphBuilder('chain');
    const x = b.input('x', 'float32', [1472 * 32]);
    let y = x;
    // 20 element-wise steps that cannot fuse (a reduction between them forces a new tensor each time)
    for (let i = 0; i < 20; i++) y = b.op('relu', [b.op('sub', [y, b.op('reduce_max', [y], { axes: [0], keepdims: true })])]);
    b.output('y', y);
    const { plan } = generatePoplar(moduleOf(b), { maxFusedOps: 1 });
    const m = plan.memory.perIpu[0]!;
    const one = 1472 * 32 * 4;
    // 60 tensors of this size are made in all, but only a few are live at any one time
    expect(m.peakLiveBytes).toBeLessThan(5 * one);
    expect(plan.memory.totalBytes).toBeGreaterThan(40 * one);
  });

  test('weights that cannot fit fail before the build, naming the parameter and its line', () => {
    const b = new GraphBuilder('big');
    const x = b.input('x', 'float32', [1, 4]);
    b.loc = fileLoc('big.tg', 3, 9);
    // 300M floats = 1.2 GB, more than the 1472 × 638976 bytes (about 0.94 GB) of one IPU
    const w = b.parameter('huge', 'float32', [4, 75_000_000], ZEROS);
    b.loc = fileLoc('big.tg', 4, 5);
    b.output('y', b.op('matmul', [x, w]));
    const text = diagnosticOf(() => generatePoplar(moduleOf(b)));
    // 300M floats = 150M grains of 2; 150M / 1472 tiles = 101902.2 → 101903 grains = 203806 floats = 815224 bytes per tile
    expect(text).toMatch(/^big\.tg:3:9: error: Out of memory on tile \d+: \d+ bytes used but tiles only have 638976 bytes of memory/);
    expect(text).toContain('815224 bytes always live');
    expect(text).toContain('live there: huge (state, 815224 bytes on this tile');
    expect(text).toContain('more IPUs');
  });

  test('an intermediate that cannot fit: the diagnostic names the op at the peak and what is live there', () => {
    const b = new GraphBuilder('wide');
    const x = b.input('x', 'float32', [20000, 8]);
    const w = b.parameter('w', 'float32', [8, 20000], ZEROS);
    b.loc = fileLoc('wide.tg', 12, 7);
    b.output('y', b.op('matmul', [x, w]));
    // 20000 × 20000 floats = 1.6 GB
    const text = diagnosticOf(() => generatePoplar(moduleOf(b)));
    expect(text).toMatch(/^wide\.tg:12:7: error: Out of memory on tile \d+: \d+ bytes used but tiles only have 638976 bytes of memory/);
    expect(text).toContain("the tile peaks at matmul in graph 'forward' at wide.tg:12:7");
    expect(text).toMatch(/live there: matmul%\d+ \(activation, \d+ bytes on this tile, 1\.49 GiB in all, made by matmul at wide\.tg:12:7\)/);
    expect(text).toContain('serialized_matmul');
  });

  test('a model that fits reports its largest tile, always-live bytes and peak', () => {
    const b = new GraphBuilder('small');
    const x = b.input('x', 'float32', [4, 8]);
    const w = b.parameter('w', 'float32', [8, 3], ZEROS);
    b.output('y', b.op('matmul', [x, w]));
    const { plan } = generatePoplar(moduleOf(b));
    expect(plan.memory.maxTileBytes).toBeGreaterThan(0);
    expect(plan.memory.maxTileBytes).toBeLessThan(GC200.bytesPerTile);
    const m = plan.memory.perIpu[0]!;
    expect(m.alwaysLiveBytes).toBeGreaterThanOrEqual(8 * 3 * 4);
    // at the matmul: the input, the product and its partial sums (x and w are made in the
    // matmul's own layout, so no rearranged copies of them)
    expect(m.peakLiveBytes).toBe((4 * 8 + 4 * 3 + 4 * 3) * 4);
    expect(generatePoplar(moduleOf(b)).files['host.cpp']).toContain('poplin::createMatMulInputRHS(d.ipu[0], poplar::FLOAT, {4, 8}, {8, 3}, "w", poplar::OptionFlags{{"availableMemoryProportion", "0.6"}, {"partialsType", "float"}, {"fullyConnectedPass", "INFERENCE_FWD"}})');
  });
});
