import { DiagnosticError, GraphBuilder, Module, Op, Value, execute, fileLoc, formatLocation, repeat, seq, streamIn } from '@tilegraph/ir';
import type { GraphEmitter } from './context.js';
import { generatePoplar } from './generate.js';
import { periodicBroadcast } from './lower/elementwise.js';
import { checkDynamicSlice, checkMultiSlice, checkMultiUpdateAdd, checkPoplinTypes, checkReduce, fillValueType } from './lower/preconditions.js';

/**
 * PopLibs calls the generator emits stay within what the libraries provide (PopLibs' vertex
 * types and template instances, its documented shapes), and a call outside them is a diagnostic
 * naming the op and its source line. test/poplar-api-check.test.ts compiles the results against
 * the real headers; these pin the generator's choices without that kit.
 */

function moduleOf(b: GraphBuilder): Module {
  const inputs = b.graph.inputs().map((op) => op.attrs['name'] as string);
  return { name: 'm', graphs: new Map([['g', b.graph]]), program: repeat(1, seq(streamIn(inputs), execute('g'))), replicationFactor: 1, variables: new Map() };
}

function generated(build: (b: GraphBuilder) => void): { host: string; codelets: string } {
  const b = new GraphBuilder('g');
  build(b);
  const { files } = generatePoplar(moduleOf(b));
  return { host: files['host.cpp'], codelets: files['codelets.cpp'] };
}

/** A stand-in emitter lowering `op` (the checks only read the op being lowered). */
function loweringOf(op: Op): GraphEmitter {
  return { current: op } as unknown as GraphEmitter;
}

function diagnosticOf(f: () => void): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(DiagnosticError);
    const d = (e as DiagnosticError).diagnostics[0]!;
    return `${d.loc ? `${formatLocation(d.loc)}: ` : ''}${d.message}`;
  }
  throw new Error('no diagnostic');
}

describe('reductions use the reductions PopLibs has', () => {
  test('unsigned sums and products reduce the same bits as int; max and min stay unsigned', () => {
    const { host } = generated((b) => {
      const x = b.input('x', 'uint32', [4, 5]);
      b.output('sum', b.op('reduce_sum', [x], { axes: [1] }));
      b.output('prod', b.op('reduce_prod', [x], { axes: [0] }));
      b.output('max', b.op('reduce_max', [x], { axes: [0] }));
    });
    const reduces = host.split('\n').filter((l) => l.includes('popops::reduce('));
    expect(reduces).toHaveLength(3);
    for (const op of ['ADD', 'MUL']) {
      const l = reduces.find((r) => r.includes(`Operation::${op}`))!;
      expect(l).toContain('.reinterpret(poplar::INT), poplar::INT,');
      expect(l).toContain('.reinterpret(poplar::UNSIGNED_INT)');
    }
    expect(reduces.find((r) => r.includes('Operation::MAX'))).toContain('poplar::UNSIGNED_INT, {0}');
  });

  test('bool max and min are LOGICAL_OR and LOGICAL_AND; over no elements, constants (fill has no bool instance)', () => {
    const { host } = generated((b) => {
      const x = b.input('x', 'bool', [3, 4]);
      b.output('any', b.op('reduce_max', [x], { axes: [1] }));
      b.output('all', b.op('reduce_min', [x], { axes: [0] }));
      const none = b.op('slice', [x], { starts: [0], ends: [0], axes: [1] });
      b.output('empty_any', b.op('reduce_max', [none], { axes: [1] }));
      b.output('empty_all', b.op('reduce_min', [none], { axes: [1] }));
    });
    expect(host).toContain('Operation::LOGICAL_OR');
    expect(host).toContain('Operation::LOGICAL_AND');
    expect(host).not.toMatch(/popops::fill(<bool>)?\(/);
    expect(host).toMatch(/addConstant<bool>\(poplar::BOOL, \{1\}, false/);
    expect(host).toMatch(/addConstant<bool>\(poplar::BOOL, \{1\}, true/);
  });

  test('other empty reductions fill with an instantiated value type', () => {
    const { host } = generated((b) => {
      const none = (dtype: 'int32' | 'uint32' | 'float16') => b.op('slice', [b.input(`x_${dtype}`, dtype, [2, 3])], { starts: [0], ends: [0], axes: [1] });
      b.output('i', b.op('reduce_min', [none('int32')], { axes: [1] }));
      b.output('u', b.op('reduce_max', [none('uint32')], { axes: [1] }));
      b.output('h', b.op('reduce_prod', [none('float16')], { axes: [1] }));
    });
    const fills = host.split('\n').filter((l) => l.includes('popops::fill'));
    expect(fills.map((l) => /popops::fill<(\w+(?: \w+)?)>/.exec(l)?.[1]).sort()).toEqual(['float', 'int', 'unsigned']);
  });
});

test('scatter_add on rank-3 data calls multiUpdateAdd with a 2-D base, scatter axis first', () => {
  const { host } = generated((b) => {
    const data = b.input('data', 'float32', [2, 5, 3]);
    const idx = b.input('idx', 'int32', [4]);
    const upd = b.input('upd', 'float32', [2, 4, 3]);
    b.output('y', b.op('scatter_add', [data, idx, upd], { axis: 1 }));
  });
  const call = host.split('\n').find((l) => l.includes('popops::multiUpdateAdd('))!;
  expect(call).toContain('.reshape({2, 5, 3}).dimShuffle({1, 0, 2}).reshape({5, 6})');
  expect(call).toContain('.reshape({2, 4, 3}).dimShuffle({1, 0, 2}).reshape({4, 1, 6})');
  expect(call).toContain('{0}, {1}, prog');
});

describe('MultiVertex codelets never let two workers write one 32-bit word', () => {
  test('half and bool outputs are word-aligned and handed out in whole words', () => {
    const { codelets } = generated((b) => {
      const h = b.input('h', 'float16', [37]);
      b.output('half', b.op('exp', [h]));
      b.output('bool', b.op('greater', [h, b.scalar('float16', 0)]));
      b.output('pool', b.op('max_pool', [b.input('img', 'float16', [1, 1, 5, 5])], { kernel: [2, 2] }));
    });
    // no loop over elements in steps of numWorkers() in a vertex with a sub-word output
    const vertices = codelets.split(/\n(?=template <typename T>\nclass |class )/).filter((c) => c.includes('MultiVertex'));
    expect(vertices.length).toBeGreaterThanOrEqual(3);
    for (const v of vertices) {
      if (!/Output<poplar::Vector<(T|half|bool)\b/.test(v)) continue;
      expect(v).not.toMatch(/\+= numWorkers\(\)\)/);
      expect(v).toMatch(/tg::workerBegin\([^,]+, tg::wordChunk</);
      expect(v).toMatch(/Output<poplar::Vector<(T|half|bool), poplar::VectorLayout::SPAN, 4>>/);
    }
  });

  test('vertices with only 32-bit outputs split by elements; float templates take chunks of wordChunk<T>() (1 for float)', () => {
    const { codelets } = generated((b) => {
      b.output('i', b.op('add', [b.input('x', 'int32', [10]), b.scalar('int32', 1)]));
      b.output('f', b.op('exp', [b.input('y', 'float32', [10])]));
    });
    expect(codelets).toContain('tg::workerBegin(n, 1u, workerId, numWorkers());');
    // the template is shared with half
    expect(codelets).toContain('tg::workerBegin(n, tg::wordChunk<T>(), workerId, numWorkers());');
    expect(codelets).toContain('for (unsigned i = workBegin; i < workEnd; ++i) {');
  });
});

test('exp and erf vertices of large tensors are built for wider vectors (TG_WIDE), vertices of small ones without vectorised loops (TG_SMALL)', () => {
  const large = generated((b) => b.output('y', b.op('erf', [b.op('exp', [b.input('x', 'float32', [64, 512])])]))).codelets;
  expect(large).toMatch(/TG_WIDE bool compute\(unsigned workerId\)[^]*tg::expFloat[^]*tg::erfFloat/);
  const small = generated((b) => b.output('y', b.op('exp', [b.input('x', 'float32', [4, 10])]))).codelets;
  expect(small).toContain('tg::expFloat');
  expect(small).not.toContain('TG_WIDE bool');
  const plain = generated((b) => b.output('y', b.op('add', [b.input('x', 'float32', [64, 512]), b.input('z', 'float32', [64, 512])]))).codelets;
  expect(plain).not.toContain('TG_WIDE bool');
  // vertices of small compute sets are built without vectorised loops (TG_SMALL); large ones with
  expect(small).toContain('TG_SMALL bool compute(unsigned workerId)');
  expect(large).not.toContain('TG_SMALL bool');
  expect(plain).not.toContain('TG_SMALL bool');
});

describe('broadcast inputs that repeat along the output are connected as the elements a vertex reads, not broadcast', () => {
  test.each([
    ['a per-channel scale', [3, 1, 1], [2, 3, 8, 10], { inner: 80, size: 3 }],
    ['a bias', [10], [4, 10], { inner: 1, size: 10 }],
    ['rows of a matrix', [1, 3, 8, 1], [2, 3, 8, 10], { inner: 10, size: 24 }],
    ['a block with dims of 1 inside', [3, 1, 8, 1], [2, 3, 1, 8, 5], { inner: 5, size: 24 }],
    ['two blocks (not one period)', [3, 1, 10], [2, 3, 8, 10], undefined],
    ['the output size (no broadcast)', [1, 40], [4, 10], undefined],
    ['a scalar', [1, 1], [4, 10], undefined],
    ['too large for a vertex to read whole', [5000], [2, 5000], undefined],
    ['a row statistic of any size (read once, along its row)', [48, 128, 1], [48, 128, 128], { inner: 128, size: 6144 }],
  ] as const)('%s', (_what, input, output, expected) => {
    expect(periodicBroadcast(input, output)).toEqual(expected);
  });

  test('the vertex reads a per-channel input by its first element', () => {
    const { host, codelets } = generated((b) => {
      b.output('y', b.op('mul', [b.input('x', 'float32', [2, 3, 4, 4]), b.input('s', 'float32', [3, 1, 1])]));
    });
    expect(host).toMatch(/addRegionVertices\(.*\{"in1", f\d+, false, false, 16, 3\}.*\);/);
    expect(host).not.toContain('broadcastTo(');
    expect(codelets).toContain('unsigned in1From;');
    expect(codelets).not.toContain('unsigned first;');
    // a worker starts from where the vertex starts, dividing only to cross a run or the period;
    // each segment reads its element and advances
    expect(codelets).toContain('unsigned alongx1 = in1Along + workBegin, atx1 = in1At;');
    expect(codelets).toContain('if (alongx1 >= in1Inner) {');
    expect(codelets).toContain('if (atx1 >= in1Size) atx1 %= in1Size;');
    expect(codelets).toContain('const T x1 = in1[atx1 - in1From];');
    expect(codelets).toContain('if (++atx1 == in1Size) atx1 = 0;');
  });

  test("the period's sizes are vertex fields: other shapes, the same device code", () => {
    const codeletsFor = (channels: number, side: number) =>
      generated((b) => {
        b.output('y', b.op('mul', [b.input('x', 'float32', [2, channels, side, side]), b.input('s', 'float32', [channels, 1, 1])]));
      }).codelets;
    expect(codeletsFor(5, 6)).toBe(codeletsFor(3, 4));
  });
});

test('random vertices draw each element from its index, in float32 only', () => {
  const { codelets } = generated((b) => {
    b.output('u', b.op('random_uniform', [], { dtype: 'float16', shape: [100], seed: 3 }));
    b.output('n', b.op('random_normal', [], { dtype: 'float32', shape: [100], seed: 4 }));
    const [y] = b.ops('dropout', [b.input('x', 'float32', [100])], { ratio: 0.25, seed: 5 });
    b.output('d', y!);
  });
  expect(codelets).toContain('tg::counterBits(key, stream, begin + i)');
  expect(codelets).not.toMatch(/\bdouble\b/);
  expect(codelets).not.toMatch(/skip|for \(unsigned i = 0; i < begin/);
  // kept when the top 24 bits reach 0.25 * 2^24
  expect(codelets).toContain('(bits >> 8) >= 4194304u');
});

describe('a batched left operand times a 2-D right one is one product of all its rows', () => {
  test('poplin::matMul over [batch * m, k], no grouped product with the weights broadcast', () => {
    const { host } = generated((b) => {
      const x = b.input('x', 'float32', [4, 3, 5]);
      const w = b.input('w', 'float32', [5, 6]);
      b.output('y', b.op('matmul', [x, w]));
      b.output('z', b.op('matmul', [x, b.op('reshape', [x], { shape: [4, 5, 3] })]));
    });
    const products = host.split('\n').filter((l) => l.includes('poplin::matMul'));
    expect(products).toHaveLength(2);
    expect(products[0]).toMatch(/poplin::matMul\(.*\.reshape\(\{12, 5\}\), .*\.reshape\(\{4, 3, 6\}\)/);
    // both operands batched: still a grouped product
    expect(products[1]).toContain('poplin::matMulGrouped(');
  });
});

describe("PopLibs' preconditions are diagnostics at the op's source line", () => {
  const b = new GraphBuilder('g');
  b.loc = fileLoc('model.tg', 12, 7);
  const x: Value = b.input('x', 'float32', [2, 5, 3]);
  const op = b.op('scatter_add', [x, b.input('i', 'int32', [4]), b.input('u', 'float32', [2, 4, 3])], { axis: 1 }).producer;
  const e = loweringOf(op);

  test.each([
    ['multiUpdateAdd on rank-3 data', () => checkMultiUpdateAdd(e, 'float32', [2, 5, 3], [4, 1, 3], [4, 1], [1], [1], { dtype: 'float32', shape: [] }), 'needs a 2-D base tensor [numBaseElements, elemSize], got [2,5,3]'],
    ['multiUpdateAdd of bool data', () => checkMultiUpdateAdd(e, 'bool', [5, 6], [4, 1, 6], [4, 1], [0], [1], { dtype: 'bool', shape: [] }), 'popops::multiUpdateAdd has no vertices for bool data'],
    ['multiUpdateAdd with a float scale for int data', () => checkMultiUpdateAdd(e, 'int32', [5, 6], [4, 1, 6], [4, 1], [0], [1], { dtype: 'float32', shape: [] }), 'a float32 scale for int32 data'],
    ['unsigned ADD reduction', () => checkReduce(e, 'ADD', 'uint32', 'uint32'), 'popops::reduce has no ADD reduction of uint32 to uint32'],
    ['bool MAX reduction', () => checkReduce(e, 'MAX', 'bool', 'bool'), 'popops::reduce has no MAX reduction of bool to bool'],
    ['fill of a bool tensor', () => fillValueType(e, 'bool'), 'popops::fill has no instance for a bool tensor'],
    ['dynamicSlice larger than the tensor', () => checkDynamicSlice(e, 'dynamicSlice', 'float32', [4, 3], { dtype: 'uint32', shape: [1] }, [0], [5]), 'a slice of 5 along dimension 0 is bigger than the tensor [4,3]'],
    ['dynamicSlice with an int offset', () => checkDynamicSlice(e, 'dynamicSlice', 'float32', [4, 3], { dtype: 'int32', shape: [1] }, [0], [2]), 'the offset must be unsigned int'],
    ['dynamicUpdate of the wrong shape', () => checkDynamicSlice(e, 'dynamicUpdate', 'float32', [4, 3], { dtype: 'uint32', shape: [1] }, [0], [2], [2, 2]), 'the update [2,2] must have the tensor'],
    ['multiSlice with 2-D offsets per index', () => checkMultiSlice(e, 'float32', [4, 3], [4, 2], [0], [1]), 'offsets [4,2] must be [numOffsets, 1]'],
    ['an int matmul in poplin', () => checkPoplinTypes(e, 'poplin::matMul', ['int32']), 'poplin::matMul takes float or half operands, not int32'],
  ] as const)('%s', (_, f, message) => {
    const d = diagnosticOf(f);
    expect(d.startsWith('model.tg:12:7: scatter_add: ')).toBe(true);
    expect(d).toContain(message);
  });

  test('calls within the preconditions pass', () => {
    expect(() => checkMultiUpdateAdd(e, 'float16', [5, 6], [4, 1, 6], [4, 1], [0], [1], { dtype: 'float32', shape: [] })).not.toThrow();
    expect(() => checkReduce(e, 'ADD', 'float16', 'float32')).not.toThrow();
    expect(() => checkReduce(e, 'MIN', 'uint32', 'uint32')).not.toThrow();
    expect(() => checkDynamicSlice(e, 'dynamicUpdate', 'bool', [4, 3], { dtype: 'uint32', shape: [1] }, [1], [2], [4, 2])).not.toThrow();
    expect(fillValueType(e, 'float16')).toBe('float');
  });
});
