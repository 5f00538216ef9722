import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Options, loadModelFile, onnxTesting } from '@tilegraph/frontend';
import { ONNX_DTYPE as T } from '@tilegraph/frontend';
import { printGraph } from '@tilegraph/ir';

/**
 * Valid inputs of every kind tilegraph reads, which the fuzzer mutates: model-language files,
 * text IR, ONNX models, options files and exported executables. Each seed names the commands
 * that read it (FILE stands for the mutated file).
 */

export type SeedKind = 'tg' | 'tgir' | 'onnx' | 'options' | 'exe';

export interface Seed {
  readonly kind: SeedKind;
  readonly name: string;
  /** The file name the mutated bytes are written to (its extension picks the reader). */
  readonly file: string;
  readonly bytes: Uint8Array;
  readonly commands: readonly (readonly string[])[];
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const EXAMPLES = path.join(ROOT, 'examples');
const enc = new TextEncoder();

/** A model-language file using the language's statements beyond the examples: fn, if, for, scope, const. */
const FEATURES_TG = `# statements, calls and annotations in one small model
import "std/nn.tg"

const WIDTH = 8

fn block2(x, n: int, residual: bool = true) {
  let h = relu(linear(x, n, n) as inner)
  if residual { return h + x } else { return h }
}

model features(batch: int = 2, depth: int = 2) {
  input x: f32[batch, WIDTH]
  input y: i32[batch]
  let h = x
  for i in range(depth) {
    scope "layer" {
      let h = block2(h, WIDTH, residual = i % 2 == 0) as layers[i]
    }
  }
  let z = reshape(h, [batch, 2, WIDTH / 2])
  let z = transpose(z, [0, 2, 1]) * 0.5 - 1.0
  output logits = linear(reshape(z, [batch, WIDTH]), WIDTH, 3) as head
  loss = cross_entropy(logits, y)
}
`;

function tgCommands(): string[][] {
  return [
    ['ir', 'FILE', '--batch-size', '2'],
    ['report', 'FILE', '--batch-size', '2', '--json'],
    ['run', 'FILE', '--batch-size', '2'],
    ['train', 'FILE', '--batch-size', '2', '--steps', '1', '--samples', '4', '--backend', 'reference', '--no-progress'],
  ];
}

function onnxSeeds(): Seed[] {
  const { makeModel, tensor } = onnxTesting;
  const models: [string, Uint8Array][] = [
    [
      'mlp.onnx',
      makeModel({
        nodes: [
          { op: 'Gemm', inputs: ['x', 'W', 'b'], outputs: ['h'], name: 'fc', attrs: { transB: 1 } },
          { op: 'Relu', inputs: ['h'], outputs: ['r'], name: 'act' },
          { op: 'Softmax', inputs: ['r'], outputs: ['y'], name: 'sm', attrs: { axis: 1 } },
        ],
        inputs: [{ name: 'x', type: T.FLOAT, shape: ['batch', 3] }],
        outputs: [{ name: 'y', type: T.FLOAT, shape: ['batch', 2] }],
        initializers: [tensor('W', T.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6], true), tensor('b', T.FLOAT, [2], [0.5, -0.5])],
      }),
    ],
    [
      'shapes.onnx',
      makeModel({
        nodes: [
          { op: 'Shape', inputs: ['x'], outputs: ['s'] },
          { op: 'ConstantOfShape', inputs: ['s'], outputs: ['c'], attrs: { value: { tensor: tensor('v', T.FLOAT, [1], [2]) } } },
          { op: 'Mul', inputs: ['x', 'c'], outputs: ['m'] },
          { op: 'Reshape', inputs: ['m', 'shape'], outputs: ['r'] },
          { op: 'Range', inputs: ['start', 'limit', 'delta'], outputs: ['rg'] },
          { op: 'Expand', inputs: ['r', 'eshape'], outputs: ['e'] },
          { op: 'Tile', inputs: ['e', 'reps'], outputs: ['y'] },
        ],
        inputs: [{ name: 'x', type: T.FLOAT, shape: [2, 3, 4] }],
        outputs: [{ name: 'y', type: T.FLOAT }, { name: 'rg', type: T.INT64 }],
        initializers: [
          tensor('shape', T.INT64, [2], [6, 4]),
          tensor('start', T.INT64, [], [0]),
          tensor('limit', T.INT64, [], [5]),
          tensor('delta', T.INT64, [], [1]),
          tensor('eshape', T.INT64, [3], [2, 6, 4]),
          tensor('reps', T.INT64, [3], [1, 1, 2]),
        ],
      }),
    ],
    [
      'cnn.onnx',
      makeModel({
        opset: 13,
        nodes: [
          { op: 'Conv', inputs: ['x', 'w'], outputs: ['c'], name: 'conv', attrs: { auto_pad: 'SAME_UPPER', kernel_shape: [3, 3] } },
          { op: 'MaxPool', inputs: ['c'], outputs: ['p'], attrs: { kernel_shape: [2, 2], strides: [2, 2] } },
          { op: 'Pad', inputs: ['p', 'pads'], outputs: ['q'], attrs: { mode: 'reflect' } },
          { op: 'ReduceMean', inputs: ['q'], outputs: ['y'], attrs: { axes: [2, 3], keepdims: 0 } },
        ],
        inputs: [{ name: 'x', type: T.FLOAT, shape: [1, 1, 6, 6] }],
        outputs: [{ name: 'y', type: T.FLOAT }],
        initializers: [
          tensor('w', T.FLOAT, [2, 1, 3, 3], Array.from({ length: 18 }, (_, i) => i / 10)),
          tensor('pads', T.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1]),
        ],
      }),
    ],
  ];
  // a subgraph (If) so nesting and attribute graphs are mutated too
  const branch = (op: string) => onnxTesting.modelProto({ nodes: [{ op, inputs: ['x'], outputs: [`o_${op}`] }], inputs: [], outputs: [{ name: `o_${op}`, type: T.FLOAT }] }).graph!;
  models.push([
    'if.onnx',
    makeModel({
      nodes: [
        { op: 'ReduceSum', inputs: ['x'], outputs: ['s'], attrs: { keepdims: 0 } },
        { op: 'Greater', inputs: ['s', 'zero'], outputs: ['c'] },
        { op: 'If', inputs: ['c'], outputs: ['y'], attrs: { then_branch: { graph: branch('Relu') }, else_branch: { graph: branch('Neg') } } },
      ],
      inputs: [{ name: 'x', type: T.FLOAT, shape: [2, 2] }],
      outputs: [{ name: 'y', type: T.FLOAT }],
      initializers: [tensor('zero', T.FLOAT, [], [0])],
    }),
  ]);
  return models.map(([file, bytes]) => ({
    kind: 'onnx' as const,
    name: file,
    file: 'model.onnx',
    bytes,
    commands: [
      ['import', 'FILE', '--batch-size', '2'],
      ['report', 'FILE', '--batch-size', '2', '--pipeline', 'inference'],
      ['run', 'FILE', '--batch-size', '2'],
    ],
  }));
}

/** Every seed; `exe` adds exported executables when given (they take a build to make). */
export function fuzzSeeds(exe: readonly { name: string; bytes: Uint8Array }[] = []): Seed[] {
  const seeds: Seed[] = [];
  const tgFiles = ['mlp.tg', 'cnn.tg', 'transformer.tg'];
  for (const f of tgFiles) {
    seeds.push({ kind: 'tg', name: f, file: 'model.tg', bytes: fs.readFileSync(path.join(EXAMPLES, f)), commands: tgCommands() });
  }
  seeds.push({ kind: 'tg', name: 'features.tg', file: 'model.tg', bytes: enc.encode(FEATURES_TG), commands: tgCommands() });
  for (const f of ['mlp.tg', 'cnn.tg']) {
    const g = loadModelFile(path.join(EXAMPLES, f), { args: { batch: 2 } });
    seeds.push({
      kind: 'tgir',
      name: f.replace('.tg', '.tgir'),
      file: 'model.tgir',
      bytes: enc.encode(printGraph(g, { debugInfo: true })),
      commands: [['ir', 'FILE'], ['report', 'FILE', '--json'], ['run', 'FILE']],
    });
  }
  seeds.push(...onnxSeeds());
  const mlp = path.join(EXAMPLES, 'mlp.tg');
  const optionCommands = [['report', mlp, '--batch-size', '2', '--options', 'FILE']];
  seeds.push({ kind: 'options', name: 'transformer_pipelined.opts', file: 'options.opts', bytes: fs.readFileSync(path.join(EXAMPLES, 'transformer_pipelined.opts')), commands: optionCommands });
  const json = new Options().deviceIterations(2).replicationFactor(2);
  json.Training.gradientAccumulation(3);
  seeds.push({ kind: 'options', name: 'options.json', file: 'options.json', bytes: enc.encode(JSON.stringify(json.toJSON(), null, 1)), commands: optionCommands });
  for (const e of exe) seeds.push({ kind: 'exe', name: e.name, file: 'model.tgexe', bytes: e.bytes, commands: [['load-executable', 'FILE']] });
  return seeds;
}
