import { MessageChannel, MessagePort, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { Waiting, driveSync } from './drive.js';

/**
 * Control of child processes with deadlines. The compiled backend and the build driver talk to
 * child processes from a worker thread while the calling thread waits on a shared counter with a
 * timeout — blocking (compile(), run()) or awaiting it (compileAsync(), runAsync()), see drive.ts —
 * never without a deadline, and a dead or silent child surfaces as an error.
 */

/**
 * The build runner, a separate node process that runs the commands of a build. It sits in a
 * session of its own, and so does each command (with the processes it starts), so a whole command
 * can be killed with its process group. When the process that started it goes away without a
 * word (killed by a signal, or its worker dropped), its stdin ends: it then kills every command
 * still running and removes the build folder, so nothing of the build outlives tilegraph. This
 * does not depend on signal handlers, which cannot run while the caller waits synchronously.
 */
const RUNNER_SOURCE = String.raw`
const { spawn } = require('child_process');
const fs = require('fs');
const MAX_LOG = 1 << 20;
function keepTail(s) { return s.length > MAX_LOG ? s.slice(s.length - MAX_LOG) : s; }
let setup, finished = false, killing = false, orphaned = false, input = '';
const children = new Set();
function post(msg, last) {
  try { process.stdout.write(JSON.stringify(msg) + '\n', last ? () => process.exit(0) : undefined); }
  catch (e) { orphan(); }
}
function killGroup(child) {
  try { process.kill(-child.pid, 'SIGKILL'); } catch (e) { try { child.kill('SIGKILL'); } catch (e2) {} }
}
function finish(type) { finished = true; post({ type }, true); }
function orphan() {
  if (finished || orphaned) { if (finished) process.exit(0); return; }
  orphaned = true;
  for (const c of children) killGroup(c);
  const until = Date.now() + 3000;
  const wait = () => {
    if (children.size > 0 && Date.now() < until) { setTimeout(wait, 20); return; }
    if (setup && setup.cleanup) { try { fs.rmSync(setup.cleanup, { recursive: true, force: true }); } catch (e) {} }
    process.exit(0);
  };
  wait();
}
process.stdout.on('error', orphan);
process.stdin.setEncoding('utf8');
process.stdin.on('end', orphan);
process.stdin.on('error', orphan);
process.stdin.on('data', (d) => {
  input += d;
  for (let nl = input.indexOf('\n'); nl >= 0; nl = input.indexOf('\n')) {
    const line = input.slice(0, nl);
    input = input.slice(nl + 1);
    if (!setup) { setup = JSON.parse(line); runStage(); }
    else if (line === 'kill' && !killing) {
      // answered once every command has exited (and been reaped)
      killing = true;
      if (children.size === 0) finish('killed');
      for (const c of children) killGroup(c);
    }
  }
});
// stages run one after another; the commands of a stage run in parallel (at most 'parallel')
let s = 0;
function runStage() {
  if (orphaned || killing) return;
  if (s >= setup.stages.length) { finish('done'); return; }
  const jobs = setup.stages[s++];
  const parallel = Math.max(1, setup.parallel);
  let next = 0, running = 0, failed = false, finishedJobs = 0;
  const startOne = () => {
    const job = jobs[next++];
    running++;
    let out = '', err = '';
    let child;
    try {
      child = spawn(job.cmd, job.args, { cwd: job.cwd, stdio: ['ignore', 'pipe', 'pipe'], env: job.env || process.env, detached: true });
    } catch (e) {
      failed = true;
      post({ type: 'error', job, code: null, signal: null, stdout: '', stderr: String(e && e.message || e) });
      return;
    }
    if (child.pid) children.add(child);
    const timer = job.timeoutMs ? setTimeout(() => { err += '\n[killed after ' + job.timeoutMs + ' ms]'; killGroup(child); }, job.timeoutMs) : undefined;
    child.stdout.on('data', (d) => { out = keepTail(out + d); });
    child.stderr.on('data', (d) => { err = keepTail(err + d); });
    child.on('error', (e) => { err += String(e && e.message || e); });
    child.on('close', (code, sig) => {
      children.delete(child);
      if (timer) clearTimeout(timer);
      running--;
      if (orphaned) return;
      if (killing) {
        if (children.size === 0) finish('killed');
        return;
      }
      finishedJobs++;
      if (failed) return;
      if (code !== 0) {
        failed = true;
        post({ type: 'error', job, code, signal: sig, stdout: out, stderr: err });
        return;
      }
      post({ type: 'progress', label: job.label });
      if (finishedJobs === jobs.length) runStage();
      else while (running < parallel && next < jobs.length) startOne();
    });
  };
  if (jobs.length === 0) { runStage(); return; }
  while (running < parallel && next < jobs.length) startOne();
}
`;

/** The worker: spawns children with argument arrays (never a shell) and reports on a port. */
const WORKER_SOURCE = String.raw`
const { workerData, parentPort } = require('worker_threads');
const { spawn } = require('child_process');
const signal = new Int32Array(workerData.signal);
const port = workerData.port;
const MAX_LOG = 1 << 20;
function post(msg, transfer) {
  port.postMessage(msg, transfer || []);
  Atomics.add(signal, 0, 1);
  Atomics.notify(signal, 0);
}
function keepTail(s) { return s.length > MAX_LOG ? s.slice(s.length - MAX_LOG) : s; }

if (workerData.mode === 'jobs') {
  // the runner reports in JSON lines; this worker passes them on
  const runner = spawn(process.execPath, ['-e', workerData.runner], { stdio: ['pipe', 'pipe', 'pipe'], detached: true, env: process.env });
  Atomics.store(signal, 1, runner.pid || -1);
  Atomics.notify(signal, 1);
  let buf = '', errText = '', ended = false;
  runner.stdin.on('error', () => {});
  // the jobs come with the worker, or later in a 'jobs' message (a runner started early)
  let given = [];
  const start = (d) => {
    given = d.stages;
    runner.stdin.write(JSON.stringify({ stages: d.stages, parallel: d.parallel, cleanup: d.cleanup }) + '\n');
  };
  if (workerData.stages) start(workerData);
  runner.stdout.setEncoding('utf8');
  runner.stdout.on('data', (d) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const m = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (m.type === 'done' || m.type === 'killed') ended = true;
      post(m);
    }
  });
  runner.stderr.on('data', (d) => { errText = keepTail(errText + d); });
  runner.on('error', (e) => { errText += String(e && e.message || e); });
  let stopping = false;
  runner.on('close', (code, sig) => {
    // a runner stopped before it had jobs has exited and been reaped: this worker ends with it
    if (stopping) process.exit(0);
    if (ended) return;
    const job = given.flat()[0] || { cmd: process.execPath, args: [], cwd: '', label: 'build runner' };
    post({ type: 'error', job, code: null, signal: sig, stdout: '', stderr: 'the build runner stopped unexpectedly (exit code ' + code + ')\n' + errText });
    post({ type: 'killed' });
  });
  parentPort.on('message', (m) => {
    if (m && m.type === 'jobs') start(m);
    else if (m && m.type === 'stop') { stopping = true; runner.stdin.end(); }
    else if (m && m.type === 'kill') runner.stdin.write('kill\n');
  });
} else {
  // one long-lived child answering requests: each request is written to its stdin and answered
  // by a line "ok n1 n2 ...\n" followed by n1 + n2 + ... bytes
  const child = spawn(workerData.cmd, workerData.args, { cwd: workerData.cwd, stdio: ['pipe', 'pipe', 'pipe'], env: workerData.env || process.env });
  Atomics.store(signal, 1, child.pid || -1);
  Atomics.notify(signal, 1);
  let chunks = [];
  let size = 0;
  let stderr = '';
  let pending = false;
  let closed = false;
  child.stdin.on('error', () => {});
  child.on('error', (e) => { stderr += String(e && e.message || e); });
  child.stderr.on('data', (d) => { stderr = keepTail(stderr + d); });
  // bytes the message being received needs in all (-1: not known yet), so that a large answer is
  // joined once it has all come rather than again at every chunk of the pipe
  let need = -1;
  const parse = () => {
    if (!pending || size === 0 || size < need) return;
    const buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    chunks = [buf];
    const nl = buf.indexOf(10);
    if (nl < 0) {
      if (buf.length > 4096) { pending = false; post({ type: 'error', reason: 'protocol', line: buf.subarray(0, 200).toString('latin1'), stderr }); }
      return;
    }
    const line = buf.subarray(0, nl).toString('latin1');
    const words = line.split(' ');
    const protocolError = () => { pending = false; post({ type: 'error', reason: 'protocol', line: line.slice(0, 200), stderr }); };
    const nums = words.slice(1).map(Number);
    if (!nums.every((x) => Number.isSafeInteger(x) && x >= 0)) { protocolError(); return; }
    // the payload after the line, once all of it has come: sent on in 'message', then the rest parsed
    const take = (n, message) => {
      if (buf.length < nl + 1 + n) { need = nl + 1 + n; return; }
      need = -1;
      const payload = new Uint8Array(n);
      payload.set(buf.subarray(nl + 1, nl + 1 + n));
      const rest = buf.subarray(nl + 1 + n);
      chunks = rest.length ? [rest] : [];
      size = rest.length;
      if (message.type === 'answer') pending = false;
      post({ ...message, payload }, [payload.buffer]);
      if (message.type !== 'answer') parse();
    };
    const total = (xs) => xs.reduce((a, b) => a + b, 0);
    // an output copy sent while a "runfeed" goes on: "feed <stream> <replica> <bytes>" and the bytes
    if (words[0] === 'feed' && words.length === 4) take(nums[2], { type: 'feed', stream: nums[0], replica: nums[1] });
    // a CPU op's host function asks for its results: "call <function> <replica> <bytes...>" and the inputs
    else if (words[0] === 'call' && words.length >= 3) take(total(nums.slice(2)), { type: 'call', fn: nums[0], replica: nums[1], sizes: nums.slice(2) });
    else if (words[0] === 'ok') take(total(nums), { type: 'answer', sizes: nums });
    else protocolError();
  };
  child.stdout.on('data', (d) => { chunks.push(d); size += d.length; parse(); });
  child.on('close', (code, sig) => {
    closed = true;
    post({ type: 'closed', code, signal: sig, stderr, pending });
    pending = false;
  });
  parentPort.on('message', (req) => {
    if (closed) { post({ type: 'closed', code: null, signal: null, stderr, pending: true }); return; }
    pending = req.expectAnswer;
    // the parts were transferred to this thread: written from where they lie, not copied again;
    // a request buffer to recycle goes back once the pipe has taken it (no wake-up: the main
    // thread finds it when it next looks)
    for (const part of req.parts) {
      const done = req.recycle ? () => port.postMessage({ type: 'spare', buffer: part.buffer }, [part.buffer]) : undefined;
      child.stdin.write(Buffer.from(part.buffer, part.byteOffset, part.byteLength), done);
    }
    if (req.end) child.stdin.end();
    parse();
  });
}
`;

interface Channel {
  worker: Worker;
  port: MessagePort;
  signal: Int32Array;
}

function startWorker(data: Record<string, unknown>): Channel {
  const signal = new Int32Array(new SharedArrayBuffer(8));
  const { port1, port2 } = new MessageChannel();
  // the worker's source is plain CommonJS that needs no flags, and inheriting the process's would
  // break it: --input-type=module changes how it is parsed, and V8 flags such as --expose-gc are
  // refused by workers (ERR_WORKER_INVALID_EXEC_ARGV)
  const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [], workerData: { ...data, signal: signal.buffer, port: port1 }, transferList: [port1] });
  worker.unref();
  return { worker, port: port2, signal };
}

/** Waits for the next message from the worker, or undefined once `deadline` has passed. */
function* nextMessage(ch: Channel, deadline: number, tick?: () => void): Waiting<Record<string, unknown> | undefined> {
  for (;;) {
    const m = receiveMessageOnPort(ch.port);
    if (m) return m.message as Record<string, unknown>;
    const now = Date.now();
    if (now >= deadline) return undefined;
    const seen = Atomics.load(ch.signal, 0);
    const again = receiveMessageOnPort(ch.port);
    if (again) return again.message as Record<string, unknown>;
    yield { signal: ch.signal, seen, timeoutMs: Math.min(deadline - now, tick ? 200 : 60_000) };
    tick?.();
  }
}

/**
 * A CPU op's host function called by a run: the function's index, the replica, the bytes of each
 * input and the inputs. Returns the answer to send (its "ret" line and the outputs); must not throw.
 */
export type HostCallListener = (fn: number, replica: number, sizes: readonly number[], payload: Uint8Array) => Uint8Array[];

/** An output copy sent while a run goes on ("runfeed"): its stream's index, the replica and the bytes. */
export type FeedListener = (stream: number, replica: number, payload: Uint8Array) => void;

export interface Job {
  readonly cmd: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly label: string;
  readonly timeoutMs?: number;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export interface JobFailure {
  readonly job: Job;
  readonly code: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface JobsOptions {
  parallel: number;
  timeoutMs: number;
  onProgress?: (label: string) => void;
  tick?: () => void;
  /** A folder removed if this process dies before the jobs finish (the build folder). */
  cleanup?: string;
  /** A runner started beforehand (startJobsRunner), which these jobs use (and end). */
  runner?: JobsRunner;
}

/** A build runner started before its jobs are known, so that its start overlaps other work. */
export interface JobsRunner {
  readonly ch: Channel;
}

/** The runner process's id once it has started (waiting up to `timeoutMs` for it), or 0. */
export function jobsRunnerPid(r: JobsRunner, timeoutMs = 5000): number {
  if (Atomics.load(r.ch.signal, 1) === 0) Atomics.wait(r.ch.signal, 1, 0, timeoutMs);
  return Atomics.load(r.ch.signal, 1);
}

/** Starts a build runner for jobs given later to runJobs; stopJobsRunner ends one that gets none. */
export function startJobsRunner(): JobsRunner {
  return { ch: startWorker({ mode: 'jobs', runner: RUNNER_SOURCE }) };
}

/** Ends a runner that runJobs did not use: its stdin is closed, so it exits with nothing to do. */
export function stopJobsRunner(r: JobsRunner): void {
  r.ch.worker.postMessage({ type: 'stop' });
}

/**
 * Runs stages of commands (the commands of a stage in parallel), calling `onProgress` after each
 * finished command and `tick` while waiting. Returns the first failure, if any. The commands never
 * outlive this process (see RUNNER_SOURCE); abandoned midway (an error thrown into the wait), the
 * worker is ended, so the runner kills the commands and removes the `cleanup` folder.
 */
export function* runJobs(stages: readonly (readonly Job[])[], opts: JobsOptions): Waiting<JobFailure | undefined> {
  const setup = { stages, parallel: opts.parallel, ...(opts.cleanup ? { cleanup: opts.cleanup } : {}) };
  const ch = opts.runner ? opts.runner.ch : startWorker({ mode: 'jobs', ...setup, runner: RUNNER_SOURCE });
  if (opts.runner) ch.worker.postMessage({ type: 'jobs', ...setup });
  const deadline = Date.now() + opts.timeoutMs;
  // stops the commands still running (answered once they have all exited)
  function* killAll(): Waiting<void> {
    ch.worker.postMessage({ type: 'kill' });
    const until = Date.now() + 5000;
    for (let k = yield* nextMessage(ch, until); k && k['type'] !== 'killed'; k = yield* nextMessage(ch, until));
  }
  try {
    for (;;) {
      const m = yield* nextMessage(ch, deadline, opts.tick);
      if (!m) {
        yield* killAll();
        return { job: stages.flat()[0]!, code: null, signal: null, stdout: '', stderr: `the build did not finish within ${Math.round(opts.timeoutMs / 1000)} s` };
      }
      if (m['type'] === 'progress') opts.onProgress?.(m['label'] as string);
      else if (m['type'] === 'done') return undefined;
      else if (m['type'] === 'error') {
        // the other commands of the stage are of no use now
        yield* killAll();
        return m as unknown as JobFailure;
      }
    }
  } finally {
    void ch.worker.terminate();
  }
}

/** runJobs, blocking the calling thread until the jobs end. */
export function runJobsSync(stages: readonly (readonly Job[])[], opts: JobsOptions): JobFailure | undefined {
  return driveSync(runJobs(stages, opts));
}

export class ChildProcessError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
    readonly code: number | null,
  ) {
    super(message);
    this.name = 'ChildProcessError';
  }
}

const live = new Set<SyncProcess>();
let exitHook = false;

/**
 * Requests from RECYCLE_MIN_BYTES to RECYCLE_MAX_BYTES go in recycled buffers (larger ones, such
 * as a big model's state, are rare and not worth keeping memory for); a process keeps at most
 * MAX_SPARES.
 */
const RECYCLE_MIN_BYTES = 1 << 16;
const RECYCLE_MAX_BYTES = 64 << 20;
const MAX_SPARES = 2;

/**
 * A long-lived child process answering requests: request() writes a command and waits (with a
 * deadline) for its answer; requestSteps() is the same for driveAsync. One request at a time. The
 * child is killed on timeouts and when this process exits.
 */
export class SyncProcess {
  private readonly ch: Channel;
  private closed = false;
  private stderrTail = '';
  /** A request is waiting for its answer (a second one would take the first one's answer). */
  private waiting = false;
  /** Request buffers the worker has written and handed back, for the next large requests. */
  private spares: ArrayBuffer[] = [];
  /** Messages that came before the request they belong to was waiting for them. */
  private early: Record<string, unknown>[] = [];

  constructor(cmd: string, args: readonly string[], cwd: string, env?: Readonly<Record<string, string | undefined>>) {
    this.ch = startWorker({ mode: 'process', cmd, args, cwd, env });
    live.add(this);
    if (!exitHook) {
      exitHook = true;
      process.on('exit', () => {
        for (const p of live) p.kill();
      });
    }
  }

  get pid(): number {
    return Atomics.load(this.ch.signal, 1);
  }

  /** stderr of the child so far (its tail), once it has exited. */
  get stderr(): string {
    return this.stderrTail;
  }

  /**
   * Sends `parts` (a command line and payloads) and waits for the answer: the sizes on the "ok"
   * line and the payload bytes. Throws ChildProcessError when the child exits, answers something
   * else, or does not answer within `timeoutMs`.
   */
  request(parts: readonly Uint8Array[], timeoutMs: number): { sizes: number[]; payload: Uint8Array } {
    return driveSync(this.requestSteps(parts, timeoutMs));
  }

  /**
   * request() as Waiting work. Abandoned while it waits (an error thrown in), it kills the child,
   * whose state is then unknown. The parts are copied for the worker that writes them before this
   * returns its first wait: the caller may change them afterwards.
   */
  *requestSteps(parts: readonly Uint8Array[], timeoutMs: number, onFeed?: FeedListener, onCall?: HostCallListener): Waiting<{ sizes: number[]; payload: Uint8Array }> {
    if (this.closed) throw new ChildProcessError('the executable is no longer running', this.stderrTail, null);
    if (this.waiting) throw new Error('internal error: a request to the executable was made while another one waits for its answer');
    this.post(parts);
    let deadline = Date.now() + timeoutMs;
    let m: Record<string, unknown> | undefined;
    this.waiting = true;
    try {
      for (;;) {
        m = yield* this.nextMessage(deadline);
        if (m?.['type'] === 'call' && onCall) {
          // the run waits for the answer: computed here, where the registered functions live
          const answer = onCall(m['fn'] as number, m['replica'] as number, m['sizes'] as number[], m['payload'] as Uint8Array).map((p) => p.slice());
          this.ch.worker.postMessage({ parts: answer, expectAnswer: true }, answer.map((c) => c.buffer));
        } else if (m?.['type'] === 'feed' && onFeed) {
          // an output copy of a run under way: handed on, with a pause so its reader runs before the next
          onFeed(m['stream'] as number, m['replica'] as number, m['payload'] as Uint8Array);
        } else break;
        deadline = Date.now() + timeoutMs;
        yield;
      }
    } catch (e) {
      this.kill();
      this.finish();
      throw e;
    } finally {
      this.waiting = false;
    }
    if (!m) {
      this.kill();
      // the worker reports the exit with the child's stderr
      const after = yield* this.nextMessage(Date.now() + 5000);
      this.finish();
      const stderr = (after?.['stderr'] as string | undefined) ?? '';
      this.stderrTail = stderr;
      throw new ChildProcessError(`the executable did not answer within ${timeoutMs >= 10_000 ? Math.round(timeoutMs / 1000) : Number((timeoutMs / 1000).toPrecision(2))} s and was stopped`, stderr, null);
    }
    if (m['type'] === 'answer') return { sizes: m['sizes'] as number[], payload: m['payload'] as Uint8Array };
    if (m['type'] === 'call' || m['type'] === 'feed') {
      this.kill();
      this.finish();
      throw new ChildProcessError(`the executable sent a '${m['type'] as string}' message outside a run`, this.stderrTail, null);
    }
    const stderr = (m['stderr'] as string | undefined) ?? '';
    this.stderrTail = stderr;
    if (m['type'] === 'closed') {
      this.finish();
      const how = m['signal'] ? `was killed by ${m['signal'] as string}` : `exited with code ${m['code'] as number}`;
      throw new ChildProcessError(`the executable ${how}`, stderr, (m['code'] as number | null) ?? null);
    }
    this.kill();
    this.finish();
    throw new ChildProcessError(`the executable answered '${m['line'] as string}' instead of 'ok'`, stderr, null);
  }

  /**
   * Hands a request to the worker that writes it, as one buffer transferred to it. A large request
   * (a run's megabytes of inputs) goes in a buffer the worker has handed back after an earlier
   * request: a fresh one per run cost ten times the copy, in page faults.
   */
  private post(parts: readonly Uint8Array[]): void {
    const total = parts.reduce((n, p) => n + p.byteLength, 0);
    const recycle = total >= RECYCLE_MIN_BYTES && total <= RECYCLE_MAX_BYTES;
    for (let m = receiveMessageOnPort(this.ch.port); m; m = receiveMessageOnPort(this.ch.port)) this.received(m.message as Record<string, unknown>);
    const k = recycle ? this.spares.findIndex((b) => b.byteLength >= total) : -1;
    // a new buffer is not zeroed first: every byte a request uses is written
    const buffer = k >= 0 ? this.spares.splice(k, 1)[0]! : Buffer.allocUnsafeSlow(recycle ? Math.min(RECYCLE_MAX_BYTES, total + (total >> 3)) : total).buffer;
    const out = new Uint8Array(buffer, 0, total);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.byteLength;
    }
    this.ch.worker.postMessage({ parts: [out], expectAnswer: true, recycle }, [buffer]);
  }

  /** A message that came while no request waited: a spare buffer is kept (the largest ones), anything else waits for the next request. */
  private received(m: Record<string, unknown>): void {
    if (m['type'] !== 'spare') {
      this.early.push(m);
      return;
    }
    const b = m['buffer'] as ArrayBuffer;
    if (this.spares.length < MAX_SPARES) this.spares.push(b);
    else {
      const smallest = this.spares.reduce((k, x, i) => (x.byteLength < this.spares[k]!.byteLength ? i : k), 0);
      if (b.byteLength > this.spares[smallest]!.byteLength) this.spares[smallest] = b;
    }
  }

  /** The next message for a request (spare buffers put aside), or undefined once `deadline` has passed. */
  private *nextMessage(deadline: number): Waiting<Record<string, unknown> | undefined> {
    for (;;) {
      const e = this.early.shift();
      if (e) return e;
      const m = yield* nextMessage(this.ch, deadline);
      if (!m || m['type'] !== 'spare') return m;
      this.received(m);
    }
  }

  /** Sends "quit" and waits briefly for the child to exit; kills it otherwise. */
  close(timeoutMs = 10_000): void {
    if (this.closed) return;
    // while a request waits, "quit" would be read as its answer's successor: stop the child instead
    if (this.waiting) {
      this.kill();
      return;
    }
    const quit = new TextEncoder().encode('quit\n');
    this.ch.worker.postMessage({ parts: [quit], expectAnswer: false, end: true }, [quit.buffer]);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = driveSync(this.nextMessage(deadline));
      if (!m) {
        this.kill();
        break;
      }
      if (m['type'] === 'closed') break;
    }
    this.finish();
  }

  kill(): void {
    if (this.closed) return;
    // the worker may not have started the child yet: its pid comes within moments
    if (Atomics.load(this.ch.signal, 1) === 0) Atomics.wait(this.ch.signal, 1, 0, 5000);
    const pid = this.pid;
    if (pid > 0) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  private finish(): void {
    this.closed = true;
    live.delete(this);
    void this.ch.worker.terminate();
  }
}
