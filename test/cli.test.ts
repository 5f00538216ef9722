import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ROOT, runCli } from './support/cli.js';

/** The `tilegraph` command as a user runs it (built by `npm test` before jest starts). */

const root = ROOT;
const run = (...args: string[]) => runCli(args, 60_000);

describe('tilegraph CLI', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-cli-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('prints the IR of a model file, with locations and excludes', () => {
    const r = run('ir', 'examples/mlp.tg');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^graph @mlp \{/);
    expect(r.out).not.toContain('loc(');
    const d = run('ir', 'examples/mlp.tg', '--print-debuginfo');
    expect(d.out).toContain('loc("std/nn.tg":');
    const e = run('ir', 'examples/mlp.tg', '--exclude', 'std/');
    // every op made inside the standard library now points at the user's call
    expect(e.out).not.toContain('std/nn.tg');
    expect(e.out).toContain('loc("examples/mlp.tg":7:');
  });

  it('reports model errors as file:line:col diagnostics with exit code 1', () => {
    const bad = path.join(tmp, 'bad.tg');
    fs.writeFileSync(bad, 'model m {\n  input x: f32[4, 784]\n  param w: f32[128, 10] = zeros()\n  output y = x @ w\n}\n');
    const r = run('ir', bad);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${bad}:4:16: error: matmul: inner dimensions differ, [4,784] @ [128,10]`);
    expect(r.err).toContain('  output y = x @ w\n                 ^');
    expect(r.out).toBe('');
  });

  it('shows serialized_matmul warnings once and stops at a factor that does not divide', () => {
    const model = (factor: number) => {
      const file = path.join(tmp, `ser${factor}.tg`);
      fs.writeFileSync(file, `model m {\n  input x: f32[6, 4]\n  param w: f32[4, 3] = ones()\n  output y = serialized_matmul(x, w, mode="reducing_dim", factor=${factor})\n  loss = y\n}\n`);
      return file;
    };
    const warning = 'warning: serialized matmul: factor 1 leaves the matmul whole';
    for (const pipeline of ['training', 'inference']) {
      const r = run('ir', model(1), '--pipeline', pipeline);
      expect(r.code).toBe(0);
      expect(r.err.split(warning)).toHaveLength(2);
      expect(r.err).toContain(`${model(1)}:4:14: ${warning}`);
    }
    const bad = run('ir', model(3), '--pipeline', 'training');
    expect(bad.code).toBe(1);
    expect(bad.err).toContain(`${model(3)}:4:14: error: serialized matmul: reducing_dim splits the reducing dimension (dimension K of X[M,K] @ W[K,N]), K = 4, into 3 parts, but 4 is not divisible by 3`);
    expect(bad.err).toContain('note: use a factor that divides 4: 1, 2, 4');
  });

  it('uses exit code 2 for command-line mistakes', () => {
    expect(run('frobnicate').code).toBe(2);
    expect(run('ir').code).toBe(2);
    expect(run('ir', 'examples/mlp.tg', '--pipeline', 'sideways').code).toBe(2);
    expect(run('ir', 'examples/mlp.tg', '--pipeline', 'training', '--print-ir-after', 'nosuchpass').code).toBe(2);
  });

  it('refuses missing and malformed model files with a diagnostic', () => {
    const missing = run('ir', path.join(tmp, 'nothing.tg'));
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/no such file: .*nothing\.tg \(the model file\)/);
    const junk = path.join(tmp, 'junk.onnx');
    fs.writeFileSync(junk, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01]));
    const r = run('import', junk);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^error: /);
    expect(r.err).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('imports an ONNX model and writes its IR', () => {
    const onnx = path.resolve(root, '../shared/oracles/mlp.onnx');
    if (!fs.existsSync(onnx)) return; // the shared oracles are beside the clone in CI
    const out = path.join(tmp, 'mlp.tgir');
    const r = run('import', onnx, '--batch-size', '2', '-o', out);
    expect(r.code).toBe(0);
    expect(r.out).toContain('inputs:  x float32[2,16]');
    const again = run('ir', out);
    expect(again.code).toBe(0);
    expect(again.out).toBe(fs.readFileSync(out, 'utf8'));
  });

  it('prints the training pipeline after a pass', () => {
    const r = run('ir', 'examples/mlp.tg', '--pipeline', 'training', '--print-ir-after', 'autograd');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^\/\/ ----- IR after autograd -----\ngraph @step/);
    expect(r.out).toContain('[scope = "fc1/grad"]');
  });

  it('trains an ONNX export with an added loss, and refuses one without', () => {
    const onnx = path.resolve(root, '../shared/oracles/mlp.onnx');
    if (!fs.existsSync(onnx)) return; // the shared oracles are beside the clone in CI
    const none = run('train', onnx, '--batch-size', '4', '--steps', '2', '--backend', 'reference', '--no-progress');
    expect(none.code).toBe(1);
    expect(none.err).toContain('error: the model has no loss');
    const r = run('train', onnx, '--batch-size', '4', '--steps', '3', '--loss', 'cross_entropy', '--backend', 'reference', '--no-progress');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/on the reference interpreter: 3 steps of 4 samples/);
  });

  it('writes the Poplar C++ of a training step', () => {
    const dir = path.join(tmp, 'cpp');
    const r = run('compile', 'examples/mlp.tg', '--emit-cpp', dir);
    expect(r.code).toBe(0);
    expect(fs.readdirSync(dir).sort()).toEqual(['codelets.cpp', 'host.cpp', 'plan.json', 'tilegraph_host.cpp', 'tilegraph_host.hpp']);
    expect(fs.readFileSync(path.join(dir, 'host.cpp'), 'utf8')).toContain('poplin::matMul(');
    expect(fs.readFileSync(path.join(dir, 'codelets.cpp'), 'utf8')).toContain('public poplar::MultiVertex');
    expect(run('compile', 'examples/mlp.tg').code).toBe(2);
  });

  it('trains the example MLP and the loss falls', () => {
    const r = run('train', 'examples/mlp.tg', '--steps', '120', '--batch-size', '32', '--optimizer', 'adam', '--lr', '0.01', '--no-progress');
    expect(r.code).toBe(0);
    const m = /loss ([0-9.]+) -> ([0-9.]+)/.exec(r.out);
    expect(m).not.toBeNull();
    expect(Number(m![2])).toBeLessThan(0.6 * Number(m![1]));
  });
});
