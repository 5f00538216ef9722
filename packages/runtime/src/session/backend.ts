import { Module, Tensor } from '@tilegraph/ir';
import { ModuleInterpreter } from '../reference/module.js';

/**
 * Where a compiled step runs. The reference backend interprets the Module on the host; the
 * compiled backend (emulated or real IPU) runs generated code. Sessions use only this interface.
 */
export interface Backend {
  readonly kind: string;
  /** Runs the program once over the given micro-batch streams; returns outputs in production order. */
  run(streams: Readonly<Record<string, readonly Tensor[]>>): Record<string, Tensor[]>;
  /** A parameter or variable, one value per replica. */
  read(name: string): Tensor[];
  /** Writes a parameter or variable on the given replicas (all when omitted). */
  write(name: string, value: Tensor, replicas?: readonly number[]): void;
  /** run() without blocking the event loop (backends that wait on another process); sessions fall back to run(). */
  runAsync?(streams: Readonly<Record<string, readonly Tensor[]>>): Promise<Record<string, Tensor[]>>;
  /**
   * runAsync() handing each output value to `onOutput` as the device produces it, while the run
   * goes on (the session's outfeed): the output's name, the replica, and the value's index among
   * that output's values of this run.
   */
  runFed?(streams: Readonly<Record<string, readonly Tensor[]>>, onOutput: OutputListener): Promise<Record<string, Tensor[]>>;
  /**
   * run(), runAsync() and runFed() copy the stream tensors' data before they return or first let
   * the event loop run, so the session may hand them views of the caller's inputs instead of
   * copies (the compiled backend writes them into its command at once; the reference interpreter
   * reads them as it goes).
   */
  readonly copiesInputsAtOnce?: boolean;
  /** Ends what the backend holds (its process); it is not used afterwards. */
  dispose?(): void;
  /**
   * The random-number counter: how many runs of random-drawing programs the stream has advanced
   * (random ops draw from (seed, counter, element), see ir/random.ts). Saved in checkpoints so a
   * resumed training draws what an uninterrupted one would.
   */
  randomCounter(): number;
  setRandomCounter(counter: number): void;
  /** For a backend built through the executable cache: whether the build was found there. */
  readonly cache?: BackendCacheStatus | undefined;
}

export type OutputListener = (name: string, replica: number, index: number, value: Tensor) => void;

export interface BackendCacheStatus {
  /** The executable came from the cache. */
  readonly hit: boolean;
  /** Why it did not, in words a user can act on. */
  readonly reason?: string;
}

export interface BackendOptions {
  seed?: number;
  print?: (line: string) => void;
  /**
   * Engine options for the executable, passed as its POPLAR_ENGINE_OPTIONS (in place of the
   * environment's, which profile/settings.ts merges in): how a profiled model's executable learns
   * where to write its profile.
   */
  engineOptions?: Readonly<Record<string, string>>;
}

export class ReferenceBackend implements Backend {
  readonly kind = 'reference';
  private readonly interp: ModuleInterpreter;
  constructor(module: Module, opts: BackendOptions = {}) {
    this.interp = new ModuleInterpreter(module, opts);
  }
  run(streams: Readonly<Record<string, readonly Tensor[]>>): Record<string, Tensor[]> {
    return this.interp.run(streams);
  }
  /** Runs pausing after each execution that produced outputs, so the event loop (an outfeed's reader) runs in between. */
  async runFed(streams: Readonly<Record<string, readonly Tensor[]>>, onOutput: OutputListener): Promise<Record<string, Tensor[]>> {
    const steps = this.interp.runSteps(streams, onOutput);
    for (let r = steps.next(); ; r = steps.next()) {
      if (r.done) return r.value;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  read(name: string): Tensor[] {
    return this.interp.read(name);
  }
  write(name: string, value: Tensor, replicas?: readonly number[]): void {
    this.interp.write(name, value, replicas);
  }
  randomCounter(): number {
    return this.interp.randomCounter;
  }
  setRandomCounter(counter: number): void {
    this.interp.randomCounter = counter;
  }
}

export type BackendFactory = ((module: Module, opts: BackendOptions) => Backend) & {
  /**
   * Starts the backend without blocking the event loop (a build, the executable loading its
   * weights); `signal` abandons the start and stops what it started. Without it, compileAsync
   * calls the factory itself.
   */
  readonly startAsync?: (module: Module, opts: BackendOptions, signal?: AbortSignal) => Promise<Backend>;
};

export const referenceBackend: BackendFactory = (m, o) => new ReferenceBackend(m, o);
