import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { jobsRunnerPid, runJobsSync, startJobsRunner, stopJobsRunner } from './sync.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-sync-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 50 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  return !alive(pid);
}

describe('synchronous job runner', () => {
  test('a runner started before its jobs runs them when they come', () => {
    const runner = startJobsRunner();
    const f = runJobsSync([[{ cmd: 'touch', args: [path.join(tmp, 'early')], cwd: tmp, label: 'touch' }]], { parallel: 1, timeoutMs: 30_000, runner });
    expect(f).toBeUndefined();
    expect(fs.existsSync(path.join(tmp, 'early'))).toBe(true);
  });

  test('a runner started early and given no jobs ends when it is stopped', async () => {
    const runner = startJobsRunner();
    const pid = jobsRunnerPid(runner);
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(true);
    stopJobsRunner(runner);
    expect(await gone(pid)).toBe(true);
  });

  test('stages run in order and report progress', () => {
    const labels: string[] = [];
    const f = runJobsSync(
      [
        [{ cmd: 'mkdir', args: [path.join(tmp, 'a')], cwd: tmp, label: 'mkdir' }],
        [{ cmd: 'touch', args: [path.join(tmp, 'a', 'b')], cwd: tmp, label: 'touch' }],
      ],
      { parallel: 2, timeoutMs: 30_000, onProgress: (l) => labels.push(l) },
    );
    expect(f).toBeUndefined();
    expect(labels).toEqual(['mkdir', 'touch']);
    expect(fs.existsSync(path.join(tmp, 'a', 'b'))).toBe(true);
  });

  test('a failing command is reported with its output; the rest of the build stops', () => {
    const f = runJobsSync([[{ cmd: 'ls', args: [path.join(tmp, 'missing')], cwd: tmp, label: 'ls' }], [{ cmd: 'touch', args: [path.join(tmp, 'never')], cwd: tmp, label: 'touch' }]], {
      parallel: 1,
      timeoutMs: 30_000,
    });
    expect(f?.job.label).toBe('ls');
    expect(f?.code).not.toBe(0);
    expect(f?.stderr).toContain('missing');
    expect(fs.existsSync(path.join(tmp, 'never'))).toBe(false);
  });

  test('a build past its deadline is stopped and its commands killed', async () => {
    const pidFile = path.join(tmp, 'pid');
    const start = Date.now();
    // long enough for the build runner to start even on a busy machine
    const f = runJobsSync([[{ cmd: 'sh', args: ['-c', `echo $$ > ${pidFile}; exec sleep 60`], cwd: tmp, label: 'sleep' }]], { parallel: 1, timeoutMs: 4000 });
    expect(Date.now() - start).toBeLessThan(20_000);
    expect(f?.stderr).toContain('did not finish within 4 s');
    expect(await gone(Number(fs.readFileSync(pidFile, 'utf8')))).toBe(true);
  });

  test.each(['SIGTERM', 'SIGKILL'] as const)('a process killed (%s) while it waits for a build leaves no command running and no build folder', async (signal) => {
    const dir = fs.mkdtempSync(path.join(tmp, 'orphan-'));
    const build = path.join(dir, '.build-x');
    fs.mkdirSync(build);
    const pidFile = path.join(dir, 'pid');
    const dist = fileURLToPath(new URL('../../dist/compiled/sync.js', import.meta.url));
    const script = path.join(dir, 'build.mjs');
    const job = { cmd: 'sh', args: ['-c', `sleep 60 & echo $! > ${pidFile}; wait`], cwd: build, label: 'sleep' };
    fs.writeFileSync(script, `import { runJobsSync } from ${JSON.stringify(dist)};\nrunJobsSync([[${JSON.stringify(job)}]], { parallel: 1, timeoutMs: 600000, cleanup: ${JSON.stringify(build)} });\n`);
    const child = spawn(process.execPath, [script], { stdio: 'ignore' });
    try {
      for (let i = 0; i < 300 && !(fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').trim()); i++) await new Promise((r) => setTimeout(r, 100));
      const pid = Number(fs.readFileSync(pidFile, 'utf8'));
      expect(alive(pid)).toBe(true);
      child.kill(signal);
      // the grandchild too: the whole process group goes
      expect(await gone(pid)).toBe(true);
      for (let i = 0; i < 50 && fs.existsSync(build); i++) await new Promise((r) => setTimeout(r, 100));
      expect(fs.existsSync(build)).toBe(false);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
