import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadWeights } from '@tilegraph/runtime';
import { ROOT } from './support/cli.js';

/**
 * Runs over several processes, as PopRun starts them: `mpirun -np 2` on this machine, each
 * process with its own replicas, together one replica set. Losses and weights must equal, step by
 * step and bit for bit, those of one process with all the replicas on the same micro-batches —
 * with weights grouped within a process, across processes (Orthogonal) and not at all.
 */

const MPIRUN = ['--allow-run-as-root', '--oversubscribe', '-np', '2'];
const WORKER = path.join(ROOT, 'test/support/distributed-worker.mjs');
const CLI = path.join(ROOT, 'tools/dist/cli.js');
const hasMpi = spawnSync('mpirun', ['--version'], { encoding: 'utf8' }).status === 0;
// CI installs OpenMPI (.ci/run); elsewhere its absence skips these tests, and says why
const describeMpi = hasMpi || process.env['CI'] ? describe : describe.skip;
if (!hasMpi && !process.env['CI']) console.warn('test/distributed-mpi.test.ts skipped: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-mpi-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const at = (...p: string[]) => path.join(tmp, ...p);

interface Result {
  process: number;
  processes: number;
  replicas: number;
  losses: number[][];
  weights: Record<string, { shape: number[]; data: number[] }>;
}

function run(cmd: string, args: string[], timeout = 600_000) {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', timeout });
  return { code: r.status, signal: r.signal, out: r.stdout ?? '', err: r.stderr ?? '', error: r.error };
}

/** One process with 4 replicas, and two processes with 2 each (results per process). */
function both(grouping: string): { single: Result; parts: Result[] } {
  const one = at(`${grouping}-single.json`);
  const s = run(process.execPath, [WORKER, one, '4', grouping]);
  if (s.code !== 0) throw new Error(`single process: exit ${s.code}\n${s.err}`);
  const base = at(`${grouping}-dist`);
  // each rank writes its own file: the rank goes into the name through the shell of each process
  const d = run('mpirun', [...MPIRUN, 'sh', '-c', `exec "${process.execPath}" "${WORKER}" "${base}.$OMPI_COMM_WORLD_RANK.json" 2 ${grouping}`]);
  if (d.code !== 0) throw new Error(`mpirun: exit ${d.code}\n${d.out}\n${d.err}`);
  const read = (f: string) => JSON.parse(fs.readFileSync(f, 'utf8')) as Result;
  return { single: read(one), parts: [0, 1].map((p) => read(`${base}.${p}.json`)) };
}

describeMpi('mpirun -np 2 (2 processes × 2 replicas) against one process with 4 replicas', () => {
  test.each(['all', 'orthogonal', 'consecutive'])('weights grouped %s: the same losses, step by step, and the same weights', (grouping) => {
    const { single, parts } = both(grouping);
    expect(single.replicas).toBe(4);
    for (const [p, r] of parts.entries()) {
      expect([r.process, r.processes, r.replicas]).toEqual([p, 2, 4]);
      // each step's losses: one per micro-batch of the process's replicas, global replicas 2p and 2p+1
      expect(r.losses).toEqual(single.losses.map((l) => l.slice(2 * p, 2 * p + 2)));
      // every process holds all groups' weights (grouped ones read from the processes that own them)
      expect(r.weights).toEqual(single.weights);
    }
    // the replicas did train apart where grouped: a grouped weight has one value per group
    if (grouping === 'orthogonal') expect(single.weights['fc1.weight']!.shape[0]).toBe(2);
  }, 900_000);

  test('a killed process ends the run with a diagnostic naming its rank, never a hang', () => {
    const r = run('mpirun', [...MPIRUN, 'sh', '-c', `exec "${process.execPath}" "${WORKER}" "${at('killed')}.$OMPI_COMM_WORLD_RANK.json" 1 all 1`], 300_000);
    expect(r.error).toBeUndefined(); // not timed out
    expect(r.code).not.toBe(0);
    expect(r.out + r.err).toMatch(/rank 1/);
    expect(fs.existsSync(at('killed.0.json'))).toBe(false);
  }, 400_000);

  test('processes started with different options are stopped at the start, saying which differs', () => {
    const r = run('mpirun', [...MPIRUN, 'sh', '-c', `exec "${process.execPath}" "${CLI}" train examples/mlp.tg --steps 2 --replicas $((OMPI_COMM_WORLD_RANK + 1))`], 300_000);
    expect(r.error).toBeUndefined();
    expect(r.code).not.toBe(0);
    expect(r.out + r.err).toMatch(/process 1 runs a different model or different options than process 0/);
  }, 400_000);

  test('tilegraph train under mpirun: one training over both processes, the weights saved once', () => {
    const save = at('mlp.safetensors');
    const r = run('mpirun', [...MPIRUN, process.execPath, CLI, 'train', 'examples/mlp.tg', '--steps', '4', '--replicas', '1', '--samples', '64', '--save', save]);
    if (r.code !== 0) throw new Error(`exit ${r.code}\n${r.out}\n${r.err}`);
    expect(r.out).toMatch(/2 processes × 1 replicas/);
    // process 0 speaks: one start line, one save line
    expect(r.out.match(/^training /gm)).toHaveLength(1);
    expect(r.out.match(/weights written to/g)).toHaveLength(1);
    expect(Object.keys(loadWeights(save)).length).toBeGreaterThan(0);
  }, 900_000);
});
