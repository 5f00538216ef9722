import { Options, TensorLocationSettings } from '@tilegraph/frontend';
import { Graph, GraphBuilder, Module, numElements } from '@tilegraph/ir';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { OptimizerSpec, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { stepSettingsFrom } from '@tilegraph/runtime';

/**
 * The memory plan follows the tensor locations: off-chip state leaves the always-live bytes of
 * its IPU and shows as remote bytes; sharded state takes 1/R of its bytes on each replica; the
 * out-of-memory diagnostic offers off-chip optimizer state only while it is on chip.
 */

/** x [batch,64] → w1 [64,128] → tanh → w2 [128,16]: element counts divide by 2 and 4. */
function mlp(batch = 8): Graph {
  const b = new GraphBuilder('mlp');
  const x = b.input('x', 'float32', [batch, 64]);
  const y = b.input('y', 'float32', [batch, 16]);
  const w1 = b.parameter('w1', 'float32', [64, 128], { kind: 'init', fn: 'xavier_uniform', args: { seed: 1 } });
  const w2 = b.parameter('w2', 'float32', [128, 16], { kind: 'init', fn: 'xavier_uniform', args: { seed: 2 } });
  const d = b.op('sub', [b.op('matmul', [b.op('tanh', [b.op('matmul', [x, w1])]), w2]), y]);
  b.op('identity_loss', [b.op('mul', [d, d])], { reduction: 'mean' });
  return b.graph;
}

const ADAM = makeOptimizer('Adam', { lr: 0.01 });
/**
 * With the optimizer state off chip, each weight's update is a graph of its own (split-update),
 * with its own scalar constants and vertices: the always-live bytes besides the state move by
 * at most this much.
 */
const SPLIT_CONSTANTS = 64;
/** Adam's two moments of w1 and w2, float32. */
const STATE_BYTES = 2 * (64 * 128 + 128 * 16) * 4;

function training(R: number, locate?: (o: Options) => void, opt: OptimizerSpec = ADAM, batch = 8): Module {
  const o = new Options().replicationFactor(R);
  locate?.(o);
  return buildTrainingModule(mlp(batch), stepSettingsFrom(o), opt).module;
}

const ipu0 = (m: Module) => generatePoplar(m).plan.memory.perIpu[0]!;
const optimizerOffChip = (o: Options) => o.TensorLocations.setOptimizerLocation(new TensorLocationSettings().useOnChipStorage(false));
const sharding = () => new TensorLocationSettings().useReplicatedTensorSharding(true).minElementsForReplicatedTensorSharding(0);
const optimizerSharded = (o: Options) => o.TensorLocations.setOptimizerLocation(sharding());
const optimizerShardedOffChip = (o: Options) => o.TensorLocations.setOptimizerLocation(sharding().useOnChipStorage(false));

describe('the plan of off-chip and sharded optimizer state', () => {
  test.each([1, 2])('off chip (%i replicas): the always-live bytes drop by the state, which the IPU holds as remote bytes', (R) => {
    const plain = ipu0(training(R));
    const off = ipu0(training(R, optimizerOffChip));
    expect(plain.remoteBytes).toBe(0);
    expect(off.remoteBytes).toBe(STATE_BYTES);
    expect(Math.abs(plain.alwaysLiveBytes - off.alwaysLiveBytes - STATE_BYTES)).toBeLessThanOrEqual(SPLIT_CONSTANTS);
    // loaded for the update only: the peak does not grow by more than the state
    expect(off.peakLiveBytes - plain.peakLiveBytes).toBeLessThanOrEqual(STATE_BYTES);
  });

  test.each([2, 4])('sharded over %i replicas: each replica keeps 1/R of the state', (R) => {
    const shardedOff = ipu0(training(R, optimizerShardedOffChip));
    expect(shardedOff.remoteBytes).toBe(STATE_BYTES / R);
    const shardedOn = ipu0(training(R, optimizerSharded));
    expect(Math.abs(shardedOn.alwaysLiveBytes - shardedOff.alwaysLiveBytes - STATE_BYTES / R)).toBeLessThanOrEqual(SPLIT_CONSTANTS);
    // on chip, the state shrinks by (1 − 1/R); the update's vertices cover fewer tiles too
    const plain = ipu0(training(R));
    expect(plain.alwaysLiveBytes - shardedOn.alwaysLiveBytes).toBeGreaterThanOrEqual(STATE_BYTES - STATE_BYTES / R);
  });

  test('sharded weights: each replica keeps half of the weights (off chip) and of their state', () => {
    const module = training(2, (o) => {
      o.TensorLocations.setWeightLocation(sharding().useOnChipStorage(false));
    });
    const m = ipu0(module);
    const weightBytes = (64 * 128 + 128 * 16) * 4;
    expect(m.remoteBytes).toBe(weightBytes / 2);
    const plain = ipu0(training(2));
    expect(plain.alwaysLiveBytes - m.alwaysLiveBytes).toBeGreaterThanOrEqual(weightBytes + STATE_BYTES / 2);
    const bytes = generatePoplar(module).plan.state.filter((s) => s.role === 'optimizer_state').reduce((n, s) => n + s.bytes, 0);
    expect(bytes).toBe(STATE_BYTES / 2);
  });

  test('inference with off-chip weights: the weights are remote bytes', () => {
    const o = new Options();
    o.TensorLocations.setWeightLocation(new TensorLocationSettings().useOnChipStorage(false));
    const plain = ipu0(buildInferenceModule(mlp(), stepSettingsFrom(new Options())));
    const off = ipu0(buildInferenceModule(mlp(), stepSettingsFrom(o)));
    expect(off.remoteBytes).toBe((64 * 128 + 128 * 16) * 4);
    expect(plain.alwaysLiveBytes - off.alwaysLiveBytes).toBe(off.remoteBytes);
  });
});

describe('the out-of-memory remedy', () => {
  // four tiles of 48 KiB: a batch of 8 does not fit, and the tile peaks in the weight update
  const small = { tilesPerIpu: 4, bytesPerTile: 48 * 1024, allowOutOfMemory: true };
  const SGD = makeOptimizer('SGD', { lr: 0.01, momentum: 0.9 });
  const remedy = (m: Module) => generatePoplar(m, small).memoryProblems.flatMap((d) => d.notes ?? []).find((n) => n.startsWith('keep the optimizer state off chip'));

  test('names the Options line and the bytes of optimizer state on the fullest tile', () => {
    const module = training(1, undefined, SGD);
    const g = generatePoplar(module, small);
    expect(g.memoryProblems.length).toBe(1);
    // the weight updates share compute sets, so their temporaries are live together
    expect(g.memoryProblems[0]!.notes![0]).toMatch(/^the tile peaks at \w+ in graph 'update' \(an op the compiler made, with no source line\)/);
    const m = g.plan.memory.perIpu[0]!;
    const momentum = new Set([...module.variables.values()].filter((v) => v.role === 'optimizer_state').map((v) => v.name));
    const onTile = m.largestAlwaysLive.filter((t) => momentum.has(t.name)).map((t) => t.tileBytes);
    expect(onTile.length).toBe(2);
    // all of it but the largest weight's, which comes on chip while that weight is updated
    const saved = onTile.reduce((n, x) => n + x, 0) - Math.max(...onTile);
    expect(saved).toBeGreaterThan(0);
    expect(remedy(module)).toBe(`keep the optimizer state off chip (TensorLocations.setOptimizerLocation(TensorLocationSettings().useOnChipStorage(False))) — saves ${saved} bytes on this tile`);
  });

  test('taking it makes this model fit; it is not offered once the state is off chip, nor for inference', () => {
    const off = training(1, optimizerOffChip, SGD);
    expect(generatePoplar(off, small).memoryProblems).toEqual([]);
    const smaller = { ...small, bytesPerTile: 32 * 1024 };
    expect(generatePoplar(off, smaller).memoryProblems.length).toBe(1);
    expect(generatePoplar(off, smaller).memoryProblems[0]!.notes!.some((n) => n.includes('optimizer state off chip'))).toBe(false);
    const inference = buildInferenceModule(mlp(64), stepSettingsFrom(new Options()));
    expect(generatePoplar(inference, { ...small, bytesPerTile: 4096 }).memoryProblems.length).toBe(1);
    expect(remedy(inference)).toBeUndefined();
  });
});

test('every off-chip variable has at least one element', () => {
  const m = training(1, (o) => o.TensorLocations.setAccumulatorLocation(new TensorLocationSettings().useOnChipStorage(false).minElementsForOffChip(0)));
  const off = [...m.variables.values()].filter((v) => v.location?.offChip);
  expect(off.map((v) => v.name).sort()).toEqual(['w1.accum', 'w2.accum']);
  for (const v of off) expect(numElements(v.type.shape)).toBeGreaterThan(0);
});
