import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Waiting, driveAsync, driveSync, driveSyncWith } from './drive.js';
import { ChildProcessError, SyncProcess, runJobs } from './sync.js';

/** Waiting work driven both ways: blocking the thread, or awaiting without blocking the event loop. */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-drive-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** The process exists and has not exited (a zombie waiting to be reaped has). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'latin1'));
  } catch {
    return false;
  }
}

async function until(what: string, cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A child that answers every request line after a pause, with the payload "abc". */
function slowEcho(): SyncProcess {
  return new SyncProcess('/bin/sh', ['-c', `while read line; do sleep 0.3; printf 'ok 3\\nabc'; done`], tmp);
}

const request = [new TextEncoder().encode('hello\n')];

describe('driving Waiting work', () => {
  test('driveSync and driveAsync run the same steps to the same result', async () => {
    function* work(log: string[]): Waiting<number> {
      log.push('a');
      yield;
      log.push('b');
      // a wait that is already over: the signal is not `seen`
      yield { signal: new Int32Array(new SharedArrayBuffer(4)), seen: 1, timeoutMs: 1000 };
      log.push('c');
      return 42;
    }
    const sync: string[] = [];
    const async_: string[] = [];
    expect(driveSync(work(sync))).toBe(42);
    expect(await driveAsync(work(async_))).toBe(42);
    expect(async_).toEqual(sync);
  });

  test('a request awaited with driveAsync lets timers run; request() blocks them', async () => {
    const proc = slowEcho();
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    try {
      const blocked = proc.request(request, 20_000);
      const duringSync = ticks;
      const awaited = await driveAsync(proc.requestSteps(request, 20_000));
      expect(new TextDecoder().decode(blocked.payload)).toBe('abc');
      expect(new TextDecoder().decode(awaited.payload)).toBe('abc');
      expect(duringSync).toBe(0);
      // the child sleeps 300 ms before it answers: the timer ran meanwhile. The interval, overdue
      // after the blocking request, fires once as the await begins; a second tick can only come
      // while the request is awaited (how many more depends on the machine's load)
      expect(ticks).toBeGreaterThanOrEqual(2);
    } finally {
      clearInterval(timer);
      proc.close();
    }
  });

  test('close() while a request waits kills the child, and the request fails saying so', async () => {
    const proc = slowEcho();
    // driveAsync sends the request before it returns
    const pending = driveAsync(proc.requestSteps(request, 20_000));
    proc.close();
    const pid = proc.pid;
    expect(pid).toBeGreaterThan(0);
    const e = await pending.then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(ChildProcessError);
    expect((e as Error).message).toMatch(/the executable was killed by SIGKILL/);
    await until('the child is gone', () => !alive(pid));
  });

  test('aborting a build stops its commands and removes its folder', async () => {
    const build = fs.mkdtempSync(path.join(tmp, '.build-'));
    const pidFile = path.join(tmp, 'sleep.pid');
    const job = { cmd: 'sh', args: ['-c', `echo $$ > ${pidFile}; exec sleep 60`], cwd: build, label: 'sleep' };
    const abort = new AbortController();
    const running = driveAsync(runJobs([[job]], { parallel: 1, timeoutMs: 600_000, cleanup: build }), abort.signal);
    await until('the command runs', () => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').trim() !== '');
    const pid = Number(fs.readFileSync(pidFile, 'utf8'));
    expect(alive(pid)).toBe(true);
    abort.abort(new Error('stopped by the test'));
    await expect(running).rejects.toThrow('stopped by the test');
    await until('the command is gone', () => !alive(pid));
    await until('the build folder is removed', () => !fs.existsSync(build));
  });

  test('driveSyncWith does the side work while a command runs, and finishes it after', () => {
    const log: string[] = [];
    let running = false;
    function* aside(n: number, stepMs = 0): Generator<void, number, void> {
      for (let i = 0; i < n; i++) {
        for (const end = Date.now() + stepMs; Date.now() < end; );
        log.push(running ? 'during' : 'outside');
        yield;
      }
      return n;
    }
    function* work(): Waiting<string> {
      running = true;
      const f = yield* runJobs([[{ cmd: 'sh', args: ['-c', 'sleep 0.5'], cwd: tmp, label: 'sleep' }]], { parallel: 1, timeoutMs: 60_000 });
      running = false;
      return f === undefined ? 'built' : 'failed';
    }
    const [built, drawn] = driveSyncWith(work(), aside(5));
    expect([built, drawn]).toEqual(['built', 5]);
    // the first step runs before the work starts; the rest while the command runs
    expect(log).toEqual(['outside', 'during', 'during', 'during', 'during']);
    // side work longer than the wait (1.5 s against 0.5 s) is finished afterwards
    log.length = 0;
    expect(driveSyncWith(work(), aside(300, 5))[1]).toBe(300);
    expect(log.filter((l) => l === 'during').length).toBeGreaterThan(0);
    expect(log.at(-1)).toBe('outside');
  });
});

/** A child that answers "echo <n>" and n bytes with the same bytes, each byte plus one, and exits at any other line. */
function echoPlusOne(): SyncProcess {
  const src = `
    let buf = Buffer.alloc(0);
    process.stdin.on('data', (d) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      for (;;) {
        const nl = buf.indexOf(10);
        if (nl < 0) return;
        const words = buf.subarray(0, nl).toString().split(' ');
        if (words[0] !== 'echo') process.exit(0);
        const n = Number(words[1]);
        if (buf.length < nl + 1 + n) return;
        const body = Buffer.from(buf.subarray(nl + 1, nl + 1 + n));
        for (let i = 0; i < n; i++) body[i] = body[i] + 1;
        buf = buf.subarray(nl + 1 + n);
        process.stdout.write('ok ' + n + '\\n');
        process.stdout.write(body);
      }
    });`;
  return new SyncProcess(process.execPath, ['-e', src], tmp);
}

test('large requests go through recycled buffers; each answer is of the bytes as they were when it was asked, whatever the caller does next', () => {
  const p = echoPlusOne();
  try {
    // sizes that reuse a handed-back buffer, fit in a larger one, and need a new one
    for (const [k, size] of [1 << 20, 1 << 20, 300_000, 2 << 20, 70_000, 1000].entries()) {
      const a = new Uint8Array(size / 2).fill(k);
      const b = new Uint8Array(size - size / 2).map((_, i) => (i * 7 + k) & 255);
      const expected = new Uint8Array(size);
      expected.set(a);
      expected.set(b, a.length);
      for (let i = 0; i < size; i++) expected[i] = (expected[i]! + 1) & 255;
      const work = p.requestSteps([new TextEncoder().encode(`echo ${size}\n`), a, b], 20_000);
      const first = work.next();
      // the request has been handed to the writer: the caller's arrays may change now
      a.fill(255);
      b.fill(255);
      let r = first;
      while (!r.done) {
        if (r.value) Atomics.wait(r.value.signal, 0, r.value.seen, r.value.timeoutMs);
        r = work.next();
      }
      expect(r.value.sizes).toEqual([size]);
      expect(Buffer.compare(Buffer.from(r.value.payload), Buffer.from(expected))).toBe(0);
    }
  } finally {
    p.close();
  }
});
