import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCli } from './support/cli.js';

/** Tensor locations from the `tilegraph` command line: options files set them, warnings reach stderr. */

const run = (...args: string[]) => runCli(args, 120_000);

describe('tilegraph with TensorLocations in an options file', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-cli-locations-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const options = (name: string, ...lines: string[]) => {
    const file = path.join(tmp, name);
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    return file;
  };
  const offChipAdam = options('offchip.cfg', 'replicationFactor(2)', 'TensorLocations.setOptimizerLocation(TensorLocationSettings().useOnChipStorage(False).useReplicatedTensorSharding(True).minElementsForReplicatedTensorSharding(0))');

  it('ir: the program loads and stores the off-chip optimizer state around the update, and says nothing', () => {
    const r = run('ir', 'examples/mlp.tg', '--pipeline', 'training', '--optimizer', 'adam', '--options', offChipAdam);
    expect(r.code).toBe(0);
    expect(r.err).toBe('');
    expect(r.out).toContain('optimizer_state "fc1.weight.exp_avg" : f32[256] group all off_chip shard_of f32[32,16] parts 2');
    expect(r.out).toMatch(/remote_load "fc1.weight.exp_avg", "fc1.weight.exp_avg_sq"\n\s+execute @update_0\n\s+remote_store "fc1.weight.exp_avg", "fc1.weight.exp_avg_sq"/);
    expect(r.out).toContain('reduce_scatter sum "fc1.weight.accum" -> "fc1.weight.accum.shard"');
  });

  it('train: settings that change nothing are warned about once each, and training runs', () => {
    const cfg = options('noeffect.cfg', 'TensorLocations.setWeightLocation(TensorLocationSettings().useReplicatedTensorSharding(True))', 'TensorLocations.setActivationLocation(TensorLocationSettings().useOnChipStorage(False))');
    const r = run('train', 'examples/mlp.tg', '--options', cfg, '--steps', '2', '--batch-size', '8', '--backend', 'reference', '--no-progress');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/step 2\/2/);
    expect(r.err.split('\n').filter((l) => l.startsWith('warning:'))).toEqual([
      'warning: TensorLocations.setWeightLocation: sharding has no effect: the model is not replicated (replicationFactor 1)',
      'warning: TensorLocations.setActivationLocation: activations stay on chip: they move to remote buffers only between execution phases',
    ]);
  });

  it('compile --emit-cpp: off-chip state gets remote buffers in host.cpp', () => {
    const dir = path.join(tmp, 'cpp');
    const r = run('compile', 'examples/mlp.tg', '--optimizer', 'adam', '--options', offChipAdam, '--emit-cpp', dir);
    expect(r.code).toBe(0);
    const host = fs.readFileSync(path.join(dir, 'host.cpp'), 'utf8');
    // a row of the state table declareState reads: kOffChip gives it a remote buffer
    const shapes = /kShapes = \{(.*)\};/.exec(host)![1]!.match(/\{[\d, ]*\}/g)!;
    const offChip = [...host.matchAll(/\{"[^"]+", \d+, (\d+), \d+, \d+, kOffChip\}/g)].map((m) => shapes[Number(m[1])]);
    expect(offChip).toContain('{256}');
    expect(host).toContain('gcl::reduceScatterCrossReplica(');
    expect(host).toContain('gcl::allGatherCrossReplica(');
    const plan = JSON.parse(fs.readFileSync(path.join(dir, 'plan.json'), 'utf8')) as { memory: { perIpu: { remoteBytes: number }[] } };
    // Adam's two moments of fc1 and fc2, half on each of the two replicas
    expect(plan.memory.perIpu[0]!.remoteBytes).toBe(2 * ((32 * 16 + 32 + 10 * 32 + 10) / 2) * 4);
  });
});
