import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { DiagnosticError } from '@tilegraph/ir';
import { importOnnx, importOnnxFile } from './importer.js';
import { ONNX_DTYPE as T, GraphProto, encodeModel } from './proto.js';
import { makeModel, modelProto, node, tensor, valueInfo } from './testing.js';

/**
 * Limits of the ONNX importer: tensor shapes (the IR's shape limits, with the message the model
 * language and the text IR give), constants built at import, subgraph and protobuf nesting, and
 * files that are not regular files. Each ends in a DiagnosticError naming the node or initializer;
 * nothing allocates first, overflows the stack or blocks.
 */

function diagnostics(f: () => unknown): string[] {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(DiagnosticError);
    return (e as DiagnosticError).diagnostics.map((d) => `${d.loc?.frames[0]?.name ?? ''}: ${d.message}`);
  }
  return [];
}

const constantOfShape = (dims: number[]) =>
  makeModel({
    nodes: [{ op: 'ConstantOfShape', inputs: ['s'], outputs: ['y'], attrs: { value: { tensor: tensor('v', T.FLOAT, [1], [1]) } } }],
    inputs: [],
    outputs: [{ name: 'y', type: T.FLOAT }],
    initializers: [tensor('s', T.INT64, [dims.length], dims)],
  });

describe('ONNX import limits', () => {
  test('ConstantOfShape of 2^31-1 elements is a run-time fill, nothing is built at import', () => {
    const bytes = constantOfShape([2 ** 31 - 1]);
    expect(bytes.length).toBeLessThan(256);
    const { graph } = importOnnx(bytes);
    expect(graph.ops.map((o) => o.kind)).toEqual(['constant', 'expand']);
    expect(diagnostics(() => importOnnx(constantOfShape([2 ** 31])))).toEqual([
      "ConstantOfShape_0: ConstantOfShape node 'ConstantOfShape_0': a dimension must be an integer from 0 to 2147483647 (2^31-1), got 2147483648",
    ]);
    expect(diagnostics(() => importOnnx(constantOfShape([65536, 65536])))).toEqual([
      "ConstantOfShape_0: ConstantOfShape node 'ConstantOfShape_0': a tensor holds at most 2147483647 (2^31-1) elements; shape [65536,65536] has 4294967296",
    ]);
  });

  test('inputs, initializers and op results are held to the same shape limits', () => {
    const relu = (shape: number[]) => makeModel({ nodes: [{ op: 'Relu', inputs: ['x'], outputs: ['y'] }], inputs: [{ name: 'x', type: T.FLOAT, shape }], outputs: [{ name: 'y', type: T.FLOAT }] });
    expect(diagnostics(() => importOnnx(relu([2 ** 53])))).toEqual(["x: graph input 'x': a dimension must be an integer from 0 to 2147483647 (2^31-1), got 9007199254740992"]);
    expect(diagnostics(() => importOnnx(relu([2 ** 31 - 1])))).toEqual([]);
    const expand = makeModel({
      nodes: [{ op: 'Expand', inputs: ['x', 's'], outputs: ['y'] }],
      inputs: [{ name: 'x', type: T.FLOAT, shape: [1] }],
      outputs: [{ name: 'y', type: T.FLOAT }],
      initializers: [tensor('s', T.INT64, [2], [65536, 65536])],
    });
    expect(diagnostics(() => importOnnx(expand))).toEqual(['Expand_0: expand: a tensor holds at most 2147483647 (2^31-1) elements; shape [65536,65536] has 4294967296']);
  });

  test('constants folded or built at import are bounded before they are built', () => {
    const range = makeModel({
      nodes: [{ op: 'Range', inputs: ['a', 'b', 'c'], outputs: ['y'] }],
      inputs: [],
      outputs: [{ name: 'y', type: T.INT64 }],
      initializers: [tensor('a', T.INT64, [], [0]), tensor('b', T.INT64, [], [2 ** 31 - 1]), tensor('c', T.INT64, [], [1])],
    });
    expect(diagnostics(() => importOnnx(range))[0]).toMatch(/Range node 'Range_0': the range would need a table of 2147483647 entries, more than the importer builds/);
    // a mask of ones the size of the input: made on the device, not at import
    const dropout = makeModel({
      nodes: [{ op: 'Dropout', inputs: ['x'], outputs: ['y', 'm'] }],
      inputs: [{ name: 'x', type: T.FLOAT, shape: [65536, 32767] }],
      outputs: [{ name: 'y', type: T.FLOAT }, { name: 'm', type: T.BOOL }],
    });
    const { graph } = importOnnx(dropout);
    expect(graph.ops.some((o) => o.kind === 'expand')).toBe(true);
    expect(graph.ops.filter((o) => o.kind === 'constant').every((o) => o.result.type.shape.length === 0)).toBe(true);
    const hardmax = makeModel({ nodes: [{ op: 'Hardmax', inputs: ['x'], outputs: ['y'], attrs: { axis: 0 } }], inputs: [{ name: 'x', type: T.FLOAT, shape: [2 ** 30] }], outputs: [{ name: 'y', type: T.FLOAT }] });
    expect(diagnostics(() => importOnnx(hardmax))[0]).toMatch(/Hardmax over an axis of 1073741824 would need a table/);
  });

  /** If nodes nested `depth` deep (each then-branch holds the next If). */
  function nestedIf(depth: number): Uint8Array {
    const leaf: GraphProto = { name: 'leaf', node: [node({ op: 'Identity', inputs: ['x'], outputs: ['o0'] })], output: [valueInfo({ name: 'o0', type: T.FLOAT, shape: [1] })] };
    let g = leaf;
    for (let i = 1; i <= depth; i++) {
      g = {
        name: `g${i}`,
        node: [node({ op: 'If', inputs: ['c'], outputs: [`o${i}`], name: `if${i}`, attrs: { then_branch: { graph: g }, else_branch: { graph: leaf } } })],
        output: [valueInfo({ name: `o${i}`, type: T.FLOAT, shape: [1] })],
      };
    }
    const m = modelProto({ nodes: [], inputs: [{ name: 'x', type: T.FLOAT, shape: [1] }, { name: 'c', type: T.BOOL, shape: [] }], outputs: [{ name: `o${depth}`, type: T.FLOAT, shape: [1] }] });
    m.graph!.node = g.node!;
    return encodeModel(m);
  }

  test('subgraphs nested past the limit are refused at the node that goes too deep', () => {
    expect(diagnostics(() => importOnnx(nestedIf(60)))).toEqual([]);
    const es = diagnostics(() => importOnnx(nestedIf(80)));
    expect(es).toHaveLength(1);
    expect(es[0]).toMatch(/^if80\/if79\/.*\/if16: If node 'if80\/.*\/if16': subgraphs are nested more than 64 deep here$/);
  });

  /** A protobuf nesting GraphProto → NodeProto → AttributeProto → GraphProto ... `levels` times, written without recursion. */
  function nestedMessages(levels: number): Uint8Array {
    const fields = [7]; // ModelProto.graph
    for (let i = 0; i < levels; i++) fields.push(1, 5, 6); // GraphProto.node, NodeProto.attribute, AttributeProto.g
    const headers: number[][] = [];
    let length = 0;
    for (let i = fields.length - 1; i >= 0; i--) {
      const varint: number[] = [];
      for (let n = length; ; n = Math.floor(n / 128)) {
        if (n < 128) {
          varint.push(n);
          break;
        }
        varint.push((n & 127) | 128);
      }
      const h = [(fields[i]! << 3) | 2, ...varint];
      headers.push(h);
      length += h.length;
    }
    return Uint8Array.from(headers.reverse().flat());
  }

  test('a protobuf nested past the decoder stack is a diagnostic, not a crash', () => {
    expect(diagnostics(() => importOnnx(nestedMessages(100_000)))).toEqual([': model.onnx: its messages are nested too deeply to decode (graphs inside nodes inside graphs)']);
    expect(diagnostics(() => importOnnx(nestedMessages(1000))).length).toBe(1);
  });

  describe('files', () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-onnx-limits-'));
    afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
    const external = (file: string, offset?: number, length?: number) => {
      const m = modelProto({ nodes: [{ op: 'Relu', inputs: ['w'], outputs: ['y'] }], inputs: [], outputs: [{ name: 'y', type: T.FLOAT }] });
      const entries = [{ key: 'location', value: 'w.bin' }, ...(offset !== undefined ? [{ key: 'offset', value: String(offset) }] : []), ...(length !== undefined ? [{ key: 'length', value: String(length) }] : [])];
      m.graph!.initializer = [{ name: 'w', dataType: T.FLOAT, dims: [2], dataLocation: 1, externalData: entries }];
      fs.writeFileSync(file, encodeModel(m));
    };

    test('external data in a FIFO is refused without blocking', () => {
      const dir = path.join(tmp, 'fifo');
      fs.mkdirSync(dir);
      // mkfifo is part of POSIX; on a system without it there is no FIFO to refuse
      if (spawnSync('mkfifo', [path.join(dir, 'w.bin')]).status !== 0) return;
      external(path.join(dir, 'm.onnx'));
      expect(diagnostics(() => importOnnxFile(path.join(dir, 'm.onnx')))).toEqual(["w: initializer 'w': external data location 'w.bin' is refused: it is not a regular file"]);
      expect(diagnostics(() => importOnnxFile(path.join(dir, 'w.bin')))).toEqual([`: cannot read '${path.join(dir, 'w.bin')}': it is not a regular file (a FIFO)`]);
    });

    test('an external data range past the end of its file is refused before reading', () => {
      const dir = path.join(tmp, 'range');
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'w.bin'), new Uint8Array(8));
      external(path.join(dir, 'm.onnx'), 2 ** 40, 8);
      expect(diagnostics(() => importOnnxFile(path.join(dir, 'm.onnx')))).toEqual([
        "w: initializer 'w': external data range offset 1099511627776, length 8 lies outside 'w.bin' (8 bytes)",
      ]);
    });

    test('a device is not read as a model', () => {
      expect(diagnostics(() => importOnnxFile('/dev/zero'))).toEqual([": cannot read '/dev/zero': it is not a regular file (a device)"]);
    });
  });
});
