import { Op, numElements } from '@tilegraph/ir';
import { GraphEmitter } from '../context.js';
import { deviceType, float64Literal } from '../types.js';
import type { Lowering } from './index.js';

/**
 * Random ops in generated vertices running the reference generator (xoshiro128** seeded through
 * splitmix32, tg::Rng in the codelets) with the reference's seeding: op seed ^ the replica's
 * mixed run seed (d.seed, written by the host), stream = the execution counter (d.step). Each
 * vertex produces one region of the result and first skips the draws of the elements before it,
 * so the values do not depend on the tile mapping.
 */

/** The seed and step tensors on an IPU (copied from IPU 0 once per graph). */
function seedAndStep(e: GraphEmitter, ipu: number): [string, string] {
  e.mc.usesRandom = true;
  if (ipu === 0) return ['d.seed', 'd.step'];
  const key = `seed@${ipu}`;
  const known = e.cache.get(key) as [string, string] | undefined;
  if (known) return known;
  const s = e.newTensor('uint32', [], ipu, 'seed');
  const t = e.newTensor('uint32', [], ipu, 'step');
  e.emit(`prog.add(poplar::program::Copy(d.seed, ${s}));`);
  e.emit(`prog.add(poplar::program::Copy(d.step, ${t}));`);
  e.cache.set(key, [s, t]);
  return [s, t];
}

/** The op's seed attribute as the uint32 the reference XORs with the run seed. */
function opSeed(op: Op): string {
  return `${((op.attrs['seed'] as number) | 0) >>> 0}u`;
}

function randomVertex(name: string, fields: string[], skip: string, draw: string[]): string {
  return [
    'template <typename T>',
    `class ${name} : public poplar::Vertex {`,
    'public:',
    '  poplar::Input<unsigned> seed;',
    '  poplar::Input<unsigned> step;',
    ...fields,
    '  unsigned begin;',
    '',
    '  void compute() {',
    '    tg::Rng rng(SEED ^ *seed, *step);',
    `    for (unsigned i = 0; i < begin; ++i) ${skip};`,
    '    for (unsigned i = 0; i < out.size(); ++i) {',
    ...draw.map((l) => `      ${l}`),
    '    }',
    '  }',
    '};',
  ].join('\n');
}

/** Emits one vertex per region of `out`, connecting `extra` fields sliced like it. */
function emitRandom(op: Op, e: GraphEmitter, vertex: string, out: string, extra: { field: string; tensor: string; mapHere?: boolean }[]): void {
  const ipu = e.ipuOf(op);
  const g = e.g(ipu);
  const [seed, step] = seedAndStep(e, ipu);
  const fo = e.local('f');
  e.emit(`poplar::Tensor ${fo} = ${out}.flatten();`);
  const flat = extra.map((x) => {
    const l = e.local('f');
    e.emit(`poplar::Tensor ${l} = ${x.tensor}.flatten();`);
    return l;
  });
  const cs = e.computeSet(op.kind);
  const conn = [
    `{"seed", ${seed}}`,
    `{"step", ${step}}`,
    `{"out", ${fo}.slice(b, e)}`,
    ...extra.map((x, i) => `{"${x.field}", ${flat[i]!}.slice(b, e)}`),
  ];
  e.emit(`forEachRegion(${g}, ${fo}, [&](unsigned tile, std::size_t b, std::size_t e) {`);
  e.emit(`  poplar::VertexRef v = ${g}.addVertex(${cs}, "${vertex}", {${conn.join(', ')}});`);
  e.emit(`  ${g}.setInitialValue(v["begin"], unsigned(b));`);
  e.emit(`  ${g}.setTileMapping(v, tile);`);
  e.emit(`  setCycles(${g}, v, e - b, 12);`);
  extra.forEach((x, i) => {
    if (x.mapHere) e.emit(`  ${g}.setTileMapping(${flat[i]!}.slice(b, e), tile);`);
  });
  e.emit('});');
  e.emit(`prog.add(poplar::program::Execute(${cs}));`);
}

function lowerDropout(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const [y, mask] = op.results as [import('@tilegraph/ir').Value, import('@tilegraph/ir').Value];
  const ratio = op.attrs['ratio'] as number;
  const ipu = e.ipuOf(op);
  if (!(op.attrs['training'] as boolean) || ratio === 0) {
    // identity with an all-true mask
    e.alias(y, x);
    const one = e.scalarConstant('bool', 1, ipu);
    e.define(mask, `broadcastTo(${one}, {${mask.type.shape.join(', ')}})`, ipu);
    return;
  }
  const scale = ratio === 1 ? 0 : 1 / (1 - ratio);
  const key = `${opSeed(op)},${ratio}`;
  const cls = e.mc.codelets.add(
    'Dropout',
    key,
    (name) =>
      randomVertex(
        name,
        ['  poplar::Input<poplar::Vector<T>> in;', '  poplar::Output<poplar::Vector<T>> out;', '  poplar::Output<poplar::Vector<bool>> mask;'],
        'rng.nextU32()',
        [
          `const double keep = rng.uniform() >= ${float64Literal(ratio)} ? 1.0 : 0.0;`,
          'mask[i] = keep != 0;',
          `out[i] = T(float(double(float(in[i])) * keep * ${float64Literal(scale)}));`,
        ],
      ).replace('SEED', opSeed(op)),
    ['float', 'half'],
  );
  const vertex = e.mc.codelets.vertexName(cls, deviceType(y.type.dtype).device);
  const out = e.newResult(y, ipu);
  const m = e.newUnmappedResult(mask, ipu);
  if (numElements(y.type.shape) === 0) return;
  const xin = e.operand(op, 0);
  emitRandom(op, e, vertex, out, [
    { field: 'in', tensor: xin },
    { field: 'mask', tensor: m, mapHere: true },
  ]);
}

function lowerRandom(kind: 'normal' | 'uniform'): Lowering {
  return (op, e) => {
    const out = op.result;
    const ipu = e.ipuOf(op);
    const a = op.attrs;
    const draw =
      kind === 'uniform'
        ? `out[i] = T(float(${float64Literal(a['low'] as number)} + ${float64Literal((a['high'] as number) - (a['low'] as number))} * rng.uniform()));`
        : `out[i] = T(float(${float64Literal(a['mean'] as number)} + ${float64Literal(a['std'] as number)} * rng.normal()));`;
    const cls = e.mc.codelets.add(
      kind === 'uniform' ? 'RandomUniform' : 'RandomNormal',
      `${opSeed(op)},${draw}`,
      (name) =>
        randomVertex(name, ['  poplar::Output<poplar::Vector<T>> out;'], kind === 'uniform' ? 'rng.nextU32()' : 'rng.skipNormal()', [draw]).replace('SEED', opSeed(op)),
      ['float', 'half'],
    );
    const vertex = e.mc.codelets.vertexName(cls, deviceType(out.type.dtype).device);
    const t = e.newResult(out, ipu);
    if (numElements(out.type.shape) === 0) return;
    emitRandom(op, e, vertex, t, []);
  };
}

export const RANDOM_LOWERINGS: Record<string, Lowering> = {
  dropout: lowerDropout,
  random_normal: lowerRandom('normal'),
  random_uniform: lowerRandom('uniform'),
};
