import { Op, Value, dropoutScale, dropoutThreshold, numElements } from '@tilegraph/ir';
import { GraphEmitter } from '../context.js';
import { deviceType, elementLiteral } from '../types.js';
import { outputVector, workerLoop } from './elementwise.js';
import type { Lowering } from './index.js';

/**
 * Random ops in generated vertices running the reference's counter-based generator
 * (tg::counterBits in cpp/codelet_random.hpp): element i draws from (op seed ^ the replica's
 * mixed run seed (d.seed, written by the host), the execution counter (d.step), i). Each vertex
 * makes one region of the result from the region's first index on, so the values do not depend
 * on the tile mapping and no vertex replays the draws of the elements before its own.
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

/**
 * A MultiVertex over one region: each worker takes chunks of whole 32-bit words of every output
 * (half and bool outputs pack several elements per word), `draw` computes element i from `bits`.
 */
function randomVertex(name: string, seed: string, fields: string[], outTypes: string[], draw: string[]): string {
  return [
    'template <typename T>',
    `class ${name} : public poplar::MultiVertex {`,
    'public:',
    '  poplar::Input<unsigned> seed;',
    '  poplar::Input<unsigned> step;',
    ...fields,
    '  unsigned begin;',
    '',
    '  bool compute(unsigned workerId) {',
    `    const unsigned key = ${seed} ^ *seed;`,
    '    const unsigned stream = *step;',
    '    const unsigned n = out.size();',
    ...workerLoop(outTypes, 'n', ['const unsigned bits = tg::counterBits(key, stream, begin + i);', ...draw]).map((l) => `    ${l}`),
    '    return true;',
    '  }',
    '};',
  ].join('\n');
}

function outputField(type: string, name: string): string {
  return `  poplar::Output<${outputVector(type)}> ${name};`;
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
  const cs = e.computeSet(op.kind, [out, ...extra.map((x) => x.tensor)].map((t) => e.bufferNamed(t)));
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
  e.emit(`  setCycles(${g}, v, e - b, 100);`);
  extra.forEach((x, i) => {
    if (x.mapHere) e.emit(`  ${g}.setTileMapping(${flat[i]!}.slice(b, e), tile);`);
  });
  e.emit('});');
  e.execute(cs);
}

const f32 = (v: number) => elementLiteral('float32', Math.fround(v));

function lowerDropout(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const [y, mask] = op.results as [Value, Value];
  const ratio = op.attrs['ratio'] as number;
  const ipu = e.ipuOf(op);
  if (!(op.attrs['training'] as boolean) || ratio === 0) {
    // identity with an all-true mask
    e.alias(y, x);
    const one = e.scalarConstant('bool', 1, ipu);
    e.define(mask, `broadcastTo(${one}, {${mask.type.shape.join(', ')}})`, ipu);
    return;
  }
  // kept when the top 24 bits of the draw are at least ratio * 2^24 (the reference's uniform >= ratio)
  const threshold = dropoutThreshold(ratio);
  const scale = f32(dropoutScale(ratio));
  const cls = e.mc.codelets.add(
    'Dropout',
    `${opSeed(op)},${threshold},${scale}`,
    (name) =>
      randomVertex(
        name,
        opSeed(op),
        ['  poplar::Input<poplar::Vector<T>> in;', outputField('T', 'out'), outputField('bool', 'mask')],
        ['T', 'bool'],
        [
          `const bool keep = (bits >> 8) >= ${threshold}u;`,
          'mask[i] = keep;',
          '// multiplied, not selected, so that NaN and inf stay visible (as in the reference)',
          'const float x = float(in[i]);',
          `const float v = keep ? x * ${scale} : x * 0.0f;`,
          'out[i] = T(v);',
        ],
      ),
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
    // low + (high - low) u and mean + std z, in float32 as the reference computes them
    const draw =
      kind === 'uniform'
        ? ['const float u = tg::uniformFromBits(bits);', `const float spread = ${f32((a['high'] as number) - (a['low'] as number))} * u;`, `const float v = ${f32(a['low'] as number)} + spread;`]
        : ['const float z = tg::normalFromBits(bits);', `const float spread = ${f32(a['std'] as number)} * z;`, `const float v = ${f32(a['mean'] as number)} + spread;`];
    draw.push('out[i] = T(v);');
    const cls = e.mc.codelets.add(
      kind === 'uniform' ? 'RandomUniform' : 'RandomNormal',
      `${opSeed(op)},${draw.join(' ')}`,
      (name) => randomVertex(name, opSeed(op), [outputField('T', 'out')], ['T'], draw),
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
