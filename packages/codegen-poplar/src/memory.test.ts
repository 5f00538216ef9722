import { DiagnosticError, GraphBuilder, Module, collectVariables, execute, fileLoc, repeat, seq, streamIn } from '@tilegraph/ir';
import { generatePoplar } from './generate.js';
import { GC200, linearMapping } from './memory.js';

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

describe('per-tile memory estimate', () => {
  test('linear mapping: equal runs of whole grains, at least the minimum per tile', () => {
    // 1000 floats, grain 2, min 32: 500 grains over 1472 tiles is 1 grain each, raised to 32 → 32 tiles
    expect(linearMapping(1000, 1472, 2, 32)).toEqual({ perTile: 32, tilesUsed: 32 });
    // 1e6 elements: 5e5 grains / 1472 tiles = 339.67 → 340 grains = 680 elements per tile, 1471 tiles
    expect(linearMapping(1_000_000, 1472, 2, 32)).toEqual({ perTile: 680, tilesUsed: 1471 });
    expect(linearMapping(0, 1472, 2, 32)).toEqual({ perTile: 0, tilesUsed: 0 });
  });

  test('weights that cannot fit fail before the build, naming the parameter and its line', () => {
    const b = new GraphBuilder('big');
    const x = b.input('x', 'float32', [1, 4]);
    b.loc = fileLoc('big.tg', 3, 9);
    // 300M floats = 1.2 GB, more than the 1472 × 638976 bytes (about 0.94 GB) of one IPU
    const w = b.parameter('huge', 'float32', [4, 75_000_000], { kind: 'init', fn: 'zeros', args: {} });
    b.loc = fileLoc('big.tg', 4, 5);
    b.output('y', b.op('matmul', [x, w]));
    const text = diagnosticOf(() => generatePoplar(moduleOf(b)));
    // 300M floats = 150M grains of 2; 150M / 1472 tiles = 101902.2 → 101903 grains = 203806 floats = 815224 bytes per tile
    expect(text).toMatch(/^big\.tg:3:9: error: Out of memory on tile 0: 815224 bytes used but tiles only have 638976 bytes of memory/);
    expect(text).toContain('parameter');
    expect(text).toContain('setAvailableMemoryProportion');
    expect(text).toContain('serializedMatMul');
    expect(text).toContain('recomputation');
    expect(text).toContain('more IPUs');
  });

  test('an intermediate that cannot fit blames the op that makes it', () => {
    const b = new GraphBuilder('wide');
    const x = b.input('x', 'float32', [20000, 8]);
    const w = b.parameter('w', 'float32', [8, 20000], { kind: 'init', fn: 'zeros', args: {} });
    b.loc = fileLoc('wide.tg', 12, 7);
    b.output('y', b.op('matmul', [x, w]));
    // 20000 × 20000 floats = 1.6 GB
    const text = diagnosticOf(() => generatePoplar(moduleOf(b)));
    expect(text).toMatch(/^wide\.tg:12:7: error: Out of memory on tile \d+: \d+ bytes used but tiles only have 638976 bytes of memory \(matmul at wide\.tg:12:7\)/);
  });

  test('a model that fits reports its largest tile', () => {
    const b = new GraphBuilder('small');
    const x = b.input('x', 'float32', [4, 8]);
    const w = b.parameter('w', 'float32', [8, 3], { kind: 'init', fn: 'zeros', args: {} });
    b.output('y', b.op('matmul', [x, w]));
    const { plan } = generatePoplar(moduleOf(b));
    expect(plan.memory.maxTileBytes).toBeGreaterThan(0);
    expect(plan.memory.maxTileBytes).toBeLessThan(GC200.bytesPerTile);
  });
});
