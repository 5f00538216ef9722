import { DiagnosticError, Tensor, error } from '@tilegraph/ir';
import type { Options } from '@tilegraph/frontend';
import { CompiledBackend } from './backend.js';
import { Backend, BackendCacheStatus, BackendFactory, OutputListener, referenceBackend } from '../session/backend.js';

/**
 * One process of a distributed run (Options.Distributed, started by mpirun). Every process runs
 * the same program, built for all N = processes × replicationFactor replicas, as one process
 * with N replicas would; poplar-host runs only this process's replicas [p·R, (p+1)·R) and
 * carries the collectives, the start-up broadcast of process 0's state and the reads of other
 * processes' replicas over MPI. This backend gives the session the process's own view: it takes
 * and returns the micro-batches of its R replicas, as PopTorch does under PopRun, while the
 * state (read, write) is that of all N replicas, as the module describes it.
 */
export interface DistributedProcess {
  readonly processId: number;
  readonly processes: number;
}

/** The environment a distributed executable needs (see poplar-host/src/world.hpp). */
export function distributedEnv(d: DistributedProcess, mpiLibrary: string, fingerprint: string, timeoutSeconds?: number): Record<string, string> {
  return {
    TILEGRAPH_NUM_PROCESSES: String(d.processes),
    TILEGRAPH_PROCESS_ID: String(d.processId),
    TILEGRAPH_MPI_LIBRARY: mpiLibrary,
    TILEGRAPH_DISTRIBUTED_FINGERPRINT: fingerprint.slice(0, 128),
    ...(timeoutSeconds !== undefined ? { TILEGRAPH_COLLECTIVE_TIMEOUT: String(timeoutSeconds) } : {}),
  };
}

/** A run over several processes needs what carries its collectives: the compiled program on MPI. */
export function checkDistributedRun(options: Options, backend: BackendFactory | undefined): void {
  const d = options.Distributed;
  if (d.numProcesses < 2) return;
  const where = `process ${d.processId} of ${d.numProcesses} (Options.Distributed)`;
  if (backend) {
    const what = backend === referenceBackend ? 'the reference interpreter runs one process' : 'this backend was not built for several processes';
    throw new DiagnosticError(error(`${where}: ${what}`, undefined, ['run distributed models on the compiled backend (the default), started with mpirun']));
  }
  if (options.input_group_size > 1) {
    throw new DiagnosticError(error(`${where}: inputReplicaGrouping is not supported in a run over several processes`, undefined, ['give each replica its own micro-batches, or run as one process']));
  }
}

const FINALIZE_TIMEOUT_MS = 10 * 60 * 1000;

export class ProcessReplicasBackend implements Backend {
  readonly kind: string;
  /** Replicas of this process. */
  private readonly local: number;
  private readonly first: number;

  constructor(
    readonly inner: Backend,
    readonly process: DistributedProcess,
    /** Replicas of the whole run. */
    private readonly replicas: number,
  ) {
    this.kind = inner.kind;
    this.local = replicas / process.processes;
    this.first = process.processId * this.local;
  }

  get cache(): BackendCacheStatus | undefined {
    return this.inner.cache;
  }

  /** The run's streams for all replicas: this process's micro-batches in its replicas' places (the others' are never read here). */
  private widen(streams: Readonly<Record<string, readonly Tensor[]>>): Record<string, Tensor[]> {
    const out: Record<string, Tensor[]> = {};
    for (const [name, parts] of Object.entries(streams)) {
      const steps = parts.length / this.local;
      const all: Tensor[] = [];
      for (let s = 0; s < steps; s++) {
        for (let g = 0; g < this.replicas; g++) {
          const mine = g >= this.first && g < this.first + this.local;
          all.push(parts[s * this.local + (mine ? g - this.first : 0)]!);
        }
      }
      out[name] = all;
    }
    return out;
  }

  /** This process's replicas' values of a run's outputs (produced replica fastest). */
  private narrow(produced: Record<string, Tensor[]>): Record<string, Tensor[]> {
    const out: Record<string, Tensor[]> = {};
    for (const [name, values] of Object.entries(produced)) out[name] = values.filter((_, j) => this.isLocal(j % this.replicas));
    return out;
  }

  private isLocal(replica: number): boolean {
    return replica >= this.first && replica < this.first + this.local;
  }

  run(streams: Readonly<Record<string, readonly Tensor[]>>): Record<string, Tensor[]> {
    return this.narrow(this.inner.run(this.widen(streams)));
  }

  async runAsync(streams: Readonly<Record<string, readonly Tensor[]>>): Promise<Record<string, Tensor[]>> {
    const wide = this.widen(streams);
    return this.narrow(this.inner.runAsync ? await this.inner.runAsync(wide) : this.inner.run(wide));
  }

  async runFed(streams: Readonly<Record<string, readonly Tensor[]>>, onOutput: OutputListener): Promise<Record<string, Tensor[]>> {
    if (!this.inner.runFed) return this.runAsync(streams);
    const wide = this.widen(streams);
    const mine: OutputListener = (name, replica, index, value) => {
      if (this.isLocal(replica)) onOutput(name, replica - this.first, index, value);
    };
    return this.narrow(await this.inner.runFed(wide, mine));
  }

  read(name: string): Tensor[] {
    return this.inner.read(name);
  }
  write(name: string, value: Tensor, replicas?: readonly number[]): void {
    this.inner.write(name, value, replicas);
  }
  /**
   * MPI ends together: a process's executable waits in MPI_Finalize until every process has
   * finished, which may be after process 0 has written its files, so it is given long to quit.
   */
  dispose(): void {
    if (this.inner instanceof CompiledBackend) this.inner.dispose(FINALIZE_TIMEOUT_MS);
    else this.inner.dispose?.();
  }
  randomCounter(): number {
    return this.inner.randomCounter();
  }
  setRandomCounter(counter: number): void {
    this.inner.setRandomCounter(counter);
  }
}
