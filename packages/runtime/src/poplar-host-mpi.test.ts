// Distributed runs of poplar-host: builds the MPI shim (poplar-host/mpi) and
// a test program (poplar-host/tests-mpi/collectives.cpp), runs the program
// alone with 4 replicas and under mpirun as 2 processes of 2 replicas, and
// checks that the processes compute what the single process computes, bit for
// bit. Needs OpenMPI (mpirun, mpicxx): CI installs openmpi-bin and
// libopenmpi-dev and fails without them; elsewhere the tests are skipped.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HOST = fileURLToPath(new URL('../poplar-host/', import.meta.url));
const PROGRAM = path.join(HOST, 'tests-mpi', 'collectives.cpp');
// Kept between runs (build.sh only recompiles what changed), one folder per checkout.
const WORK = path.join(os.tmpdir(), `tilegraph-poplar-host-mpi-tests-${os.userInfo().username}-${createHash('sha256').update(HOST).digest('hex').slice(0, 12)}`);
const CXX = process.env['CXX'] || 'g++';
const MINUTES = 60_000;
const N = 4; // replicas of the test program
const P = 2; // processes

function run(cmd: string, args: string[], timeout = 10 * MINUTES, env?: NodeJS.ProcessEnv): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024, env });
}

function mustRun(cmd: string, args: string[]): void {
  const r = run(cmd, args);
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')}\nexit ${r.status} ${r.error?.message ?? ''}\n${r.stdout}\n${r.stderr}`);
  }
}

/** Why OpenMPI cannot be used here, or '' when it can. */
function missingMpi(): string {
  for (const tool of ['mpirun', 'mpicxx']) {
    const r = spawnSync(tool, ['--version'], { encoding: 'utf8', timeout: MINUTES });
    if (r.error || r.status !== 0) return `${tool} is not available (${r.error?.message ?? `exit ${r.status}`})`;
  }
  return '';
}

const missing = missingMpi();
const inCi = process.env['CI'] === 'true';
if (missing && !inCi) {
  console.warn(`skipping the poplar-host MPI tests: ${missing}; install OpenMPI (Debian: openmpi-bin, libopenmpi-dev) to run them`);
}
const suite = missing && !inCi ? describe.skip : describe;

/** The environment without any TILEGRAPH_* variable (a plain, single-process run). */
function plainEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TILEGRAPH_')));
}

let program = '';
let shim = '';

interface MpiRun {
  processes?: number;
  env?: string[]; // more NAME=value settings
  args?: string[]; // more arguments of the program
  shell?: string; // settings made by the shell of each process (they may use $OMPI_COMM_WORLD_RANK)
}

/** Runs the program under mpirun, process i writing `${prefix}.${i}`. */
function mpirun(prefix: string, { processes = P, env = [], args = [], shell = '' }: MpiRun = {}): SpawnSyncReturns<string> & { seconds: number } {
  const start = Date.now();
  const r = run(
    'mpirun',
    [
      '--allow-run-as-root',
      '--oversubscribe',
      '-np',
      String(processes),
      'env',
      `TILEGRAPH_NUM_PROCESSES=${processes}`,
      `TILEGRAPH_MPI_LIBRARY=${shim}`,
      'TILEGRAPH_DISTRIBUTED_FINGERPRINT=collectives-test',
      ...env,
      'sh',
      '-c',
      // the process id is the MPI rank; $0 is the program, $1 the results prefix
      `${shell}TILEGRAPH_PROCESS_ID=$OMPI_COMM_WORLD_RANK exec "$0" "$1.$OMPI_COMM_WORLD_RANK" ${args.join(' ')}`,
      program,
      prefix,
    ],
    2 * MINUTES,
    plainEnv(),
  );
  return Object.assign(r, { seconds: (Date.now() - start) / 1000 });
}

type Results = Map<string, string[]>; // "<name> <replica>" -> values

function readResults(file: string): Results {
  const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
  expect(lines.at(-1)).toBe('done');
  const out: Results = new Map();
  for (const line of lines.slice(0, -1)) {
    const [name, replica, ...values] = line.split(' ');
    out.set(`${name} ${replica}`, values);
  }
  return out;
}

/** A float's bits as the program prints them. */
function bits(x: number): string {
  const v = new DataView(new ArrayBuffer(4));
  v.setFloat32(0, x);
  return v.getUint32(0).toString(16).padStart(8, '0');
}

suite('poplar-host distributed runs (MPI)', () => {
  let reference: Results;

  beforeAll(() => {
    if (missing) throw new Error(`${missing}: the CI image must install openmpi-bin and libopenmpi-dev`);
    fs.mkdirSync(WORK, { recursive: true });
    mustRun('bash', [path.join(HOST, 'build.sh'), path.join(WORK, 'lib')]);
    shim = path.join(WORK, 'libtilegraph_mpi.so');
    const mpiDir = path.join(HOST, 'mpi');
    mustRun('mpicxx', ['-O2', '-std=c++17', '-shared', '-fPIC', '-I', mpiDir, path.join(mpiDir, 'tilegraph_mpi.cpp'), '-o', shim]);
    program = path.join(WORK, 'collectives');
    mustRun(CXX, ['-std=c++17', '-O1', '-Wall', '-I', path.join(HOST, 'include'), PROGRAM, path.join(WORK, 'lib', 'libpoplar_host.a'), '-lpthread', '-o', program]);
    // the reference: one process runs all the replicas
    const ref = path.join(WORK, 'reference.txt');
    fs.rmSync(ref, { force: true });
    const r = run(program, [ref], 2 * MINUTES, plainEnv());
    if (r.status !== 0) throw new Error(`the single-process run failed: exit ${r.status} ${r.signal ?? ''}\n${r.stdout}\n${r.stderr}`);
    reference = readResults(ref);
  }, 15 * MINUTES);

  it('the single-process reference holds the hand-computed values', () => {
    const all = (name: string, values: string[]) => {
      for (let r = 0; r < N; ++r) expect([name, r, reference.get(`${name} ${r}`)]).toEqual([name, r, values]);
    };
    // k of replica r is [r+1, -10(r+1)] in the first run
    all('run0.i.add.all', ['10', '-100']);
    all('run0.i.mean.all', ['2', '-25']);
    expect(reference.get('run0.i.add.consecutive2 1')).toEqual(['3', '-30']);
    expect(reference.get('run0.i.add.consecutive2 2')).toEqual(['7', '-70']);
    expect(reference.get('run0.i.add.orthogonal2 2')).toEqual(['4', '-40']);
    expect(reference.get('run0.i.add.orthogonal2 3')).toEqual(['6', '-60']);
    expect(reference.get('run0.i.gather.orthogonal2 0')).toEqual(['1', '-10', '3', '-30']);
    // w: 1+2+3+4; 1 + 1e8 - 1e8 + 1 in float, partial sum by partial sum, is 1 (not 2)
    expect(reference.get('run0.f.add.all 0')?.[0]).toBe(bits(10));
    expect(reference.get('run0.f.add.all 0')?.[2]).toBe(bits(1));
    // process 0's weights (0.25 i) and remote row
    for (let r = 0; r < N; ++r) {
      expect(reference.get(`run0.f.weights ${r}`)).toEqual([0, 1, 2].map((i) => bits(0.25 * (r * 3 + i))));
      expect(reference.get(`run1.f.remote.row1 ${r}`)).toEqual([7, 8, 9, 10].map(bits));
    }
  });

  // 2 processes run 2 replicas each on threads; 4 processes run one each, inline
  it.each([P, N])('%i processes compute what one computes, bit for bit', (processes) => {
    const prefix = path.join(WORK, `distributed${processes}`);
    for (let p = 0; p < processes; ++p) fs.rmSync(`${prefix}.${p}`, { force: true });
    const r = mpirun(prefix, { processes });
    if (r.status !== 0) throw new Error(`mpirun failed: exit ${r.status} ${r.signal ?? ''} ${r.error?.message ?? ''}\n${r.stdout}\n${r.stderr}`);
    const R = N / processes;
    for (let p = 0; p < processes; ++p) {
      const got = readResults(`${prefix}.${p}`);
      expect([...got.keys()]).toEqual([...reference.keys()]);
      // the replicas this process ran (collectives within it and across processes; weights and
      // remote rows written differently by process 1 are process 0's after the first run)
      const local = [...reference.keys()].filter((k) => Math.floor(Number(k.split(' ')[1]) / R) === p);
      expect(local.map((k) => [k, got.get(k)])).toEqual(local.map((k) => [k, reference.get(k)]));
      // readTensor and copyFromRemoteBuffer return the other process's replicas too
      expect([...got.entries()]).toEqual([...reference.entries()]);
    }
  }, 5 * MINUTES);

  it('fails at the start when the processes run different models', () => {
    const r = mpirun(path.join(WORK, 'fingerprint'), { shell: 'TILEGRAPH_DISTRIBUTED_FINGERPRINT=model$OMPI_COMM_WORLD_RANK ' });
    expect(r.error).toBeUndefined(); // not killed by the timeout
    expect(r.status).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(
      /process 1 runs a different model or different options than process 0 \(fingerprint model1 vs model0\): start every process with the same model and options/,
    );
  }, 5 * MINUTES);

  it('fails within the timeout when a process stops before a collective', () => {
    const r = mpirun(path.join(WORK, 'early'), { env: ['TILEGRAPH_COLLECTIVE_TIMEOUT=5'], args: ['exit-early'] });
    expect(r.error).toBeUndefined(); // not killed by the timeout: nothing hung
    expect(r.status).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/waited 5 s for the other processes \(process 0 of 2\)|has ended/);
    expect(r.seconds).toBeLessThan(60);
  }, 5 * MINUTES);
});
