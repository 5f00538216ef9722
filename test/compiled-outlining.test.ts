import { jest } from '@jest/globals';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Options, loadModelFile } from '@tilegraph/frontend';
import { generatePoplar, hostUnits } from '@tilegraph/codegen-poplar';
import { Graph, Module, Rng, Tensor } from '@tilegraph/ir';
import { StepSettings, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { compileOptionsFrom, stepSettingsFrom } from '@tilegraph/runtime';
import { expectSameRuns } from './support/same-runs.js';

/**
 * Outlining: repeated layers are lowered once, as a poplar::Function each occurrence calls
 * (GenerateOptions.outline, on by default; `_Popart.set("enableOutlining", False)` turns it off).
 * The host code then grows with the distinct layers, not their count, and the results are the
 * same bits as without it.
 */

jest.setTimeout(20 * 60 * 1000);
const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples');
const SETTINGS: StepSettings = { deviceIterations: 1, replicationFactor: 1, gradientAccumulation: 1, reduction: 'mean', recomputation: 'none' };

/** A BERT-shaped encoder (examples/bert.tg) narrowed so that generation is quick; all layers on one IPU. */
function encoder(layers: number): Module {
  const g = loadModelFile(path.join(EXAMPLES, 'bert.tg'), { args: { layers, ipus: 1, d_model: 64, heads: 4, ff: 128, seq: 16 } });
  return buildInferenceModule(g, SETTINGS);
}

/** The host program: all its translation units (host.cpp declares what the others define). */
const hostCode = (m: Module, outline: boolean) => {
  const f = generatePoplar(m, { outline, allowOutOfMemory: true }).files;
  return hostUnits(f).map((u) => f[u]).join('');
};
/** The outlined bodies in a host program, by mode (function: a poplar::Function; builder: host code only). */
const bodies = (host: string, mode: 'function' | 'builder') => (host.match(mode === 'function' ? /^OutlinedFunction layer_\d+\(.*\) \{$/gm : /^std::vector<poplar::Tensor> layer_\d+\(.*\) \{$/gm) ?? []).length;
const calls = (host: string) => (host.match(/= (callFunction\(|layer_\d+\(d, )/g) ?? []).length;

/** The BERT-shaped encoder for training, narrowed; with `checkpoints` a checkpoint per layer. */
function trainedEncoder(ipus: number, recomputation: number, outline: boolean) {
  const g = loadModelFile(path.join(EXAMPLES, 'bert.tg'), { args: { layers: 12, ipus, seq: 16, d_model: 128, heads: 4, ff: 512, checkpoints: recomputation > 0 } });
  const o = new Options();
  o._Popart.set('autoRecomputation', recomputation);
  const module = buildTrainingModule(g, stepSettingsFrom(o), makeOptimizer('Adam', { lr: 1e-4 })).module;
  return generatePoplar(module, { outline, allowOutOfMemory: true }).plan.memory;
}

/** Runs `module` compiled with and without outlining on the same random feeds: every output and state the same bits. */
function expectSameBits(g: Graph, module: Module, runs: number): void {
  const rng = new Rng(11);
  expectSameRuns(module, {}, { outline: false }, runs, () => {
    const feeds: Record<string, Tensor[]> = {};
    for (const op of g.inputs()) {
      const t = op.result.type;
      const n = t.shape.reduce((a, b) => a * b, 1);
      feeds[op.attrs['name'] as string] = [Tensor.from(t.dtype, t.shape, Array.from({ length: n }, () => (t.dtype === 'int32' ? rng.nextU32() % 5 : rng.normal())))];
    }
    return feeds;
  });
}

describe('outlining', () => {
  it('lowers the 12 layers of an encoder once: its host code is at most 1.5x that of 2 layers', () => {
    const two = hostCode(encoder(2), true);
    const twelve = hostCode(encoder(12), true);
    // weights dwarf a layer's working memory: its code is shared, its tensors are not copied
    expect(bodies(twelve, 'builder')).toBe(1);
    expect(calls(twelve)).toBe(12);
    expect(twelve.length).toBeLessThanOrEqual(1.5 * two.length);
    // without outlining the code grows with every layer
    expect(hostCode(encoder(12), false).length).toBeGreaterThan(3 * hostCode(encoder(2), false).length);
  });

  it('trains the 12 layers of an encoder with Adam on host code at most 1.5x that of 2 layers', () => {
    const training = (layers: number) => {
      const g = loadModelFile(path.join(EXAMPLES, 'bert.tg'), { args: { layers, ipus: 1, d_model: 64, heads: 4, ff: 128, seq: 16 } });
      return hostCode(buildTrainingModule(g, stepSettingsFrom(new Options()), makeOptimizer('Adam', { lr: 1e-4 })).module, true);
    };
    const two = training(2);
    const twelve = training(12);
    // the state an outlined update writes is one table per call, not a commented copy per tensor
    expect(twelve).toMatch(/writeStates\(d, prog, r\d+, \{\{\d+, \d+\}, \{/);
    expect(twelve).not.toMatch(/Copy\(r\d+\[\d+\], d\.state\[/);
    expect(twelve.length).toBeLessThanOrEqual(1.5 * two.length);
  });

  it('reads the results of a layer called on another IPU than its first occurrence where it ran', () => {
    const training = (layers: number) => {
      const g = loadModelFile(path.join(EXAMPLES, 'bert.tg'), { args: { layers, ipus: 4, d_model: 64, heads: 4, ff: 128, seq: 16 } });
      return hostCode(buildTrainingModule(g, stepSettingsFrom(new Options()), makeOptimizer('Adam', { lr: 1e-4 })).module, true);
    };
    const twelve = training(12);
    const callIpu = new Map([...twelve.matchAll(/const auto (r\d+) = layer_\d+\(d, d\.ipu\[(\d+)\]/g)].map((m) => [m[1]!, m[2]!]));
    const madeIpu = new Map([...twelve.matchAll(/poplar::Tensor (u\d+) = newTensor\(d\.ipu\[(\d+)\]/g)].map((m) => [m[1]!, m[2]!]));
    expect(new Set(callIpu.values()).size).toBe(4);
    // a copy of a call's result onto the IPU the call ran on would be a copy of the tensor to itself
    const sameIpu = [...twelve.matchAll(/Copy\((r\d+)\[\d+\], (u\d+)\)/g)].filter((m) => callIpu.get(m[1]!) === madeIpu.get(m[2]!));
    expect(sameIpu.map((m) => m[0])).toEqual([]);
    // the layers of all four IPUs share their code
    expect(twelve.length).toBeLessThanOrEqual(1.5 * training(2).length);
  });

  it("builds the largest graph, when large, in host_graph.cpp: host.cpp declares its builder, which gets only the constant data it reads", () => {
    const g = loadModelFile(path.join(EXAMPLES, 'bert.tg'), { args: { layers: 12, ipus: 4, d_model: 64, heads: 4, ff: 128, seq: 16 } });
    const f = generatePoplar(buildTrainingModule(g, stepSettingsFrom(new Options()), makeOptimizer('Adam', { lr: 1e-4 })).module, { allowOutOfMemory: true }).files;
    expect(hostUnits(f)).toEqual(['host.cpp', 'host_graph.cpp', 'host_layers.cpp']);
    const builder = /^poplar::program::Sequence (graph_\w+Build)\(Device &d\) \{$/m.exec(f['host_graph.cpp']!)![1]!;
    expect(f['host.cpp']).toContain(`namespace tilegraph_graphs {\nusing namespace tilegraph;\npoplar::program::Sequence ${builder}(Device &d);\n}`);
    expect(f['host.cpp']).not.toContain(`poplar::program::Sequence ${builder}(Device &d) {`);
    expect(f['host.cpp']).toContain(`= ${builder}(d);`);
    // it is the largest graph's, and large
    const others = [...f['host.cpp'].matchAll(/^poplar::program::Sequence graph_\w+Build\(Device &d\) \{$[^]*?^\}$/gm)].map((m) => m[0].length);
    const own = /^poplar::program::Sequence graph_\w+Build\(Device &d\) \{$[^]*?^\}$/m.exec(f['host_graph.cpp']!)![0].length;
    expect(own).toBeGreaterThanOrEqual(32 * 1024);
    for (const n of others) expect(n).toBeLessThanOrEqual(own);
    for (const [, name] of f['host_graph.cpp']!.matchAll(/^const [^=[]*?(\w+)\[\d+\] = \{$/gm)) expect(f['host_graph.cpp']!.split(name!).length).toBeGreaterThan(2);
  });

  it('trains a transformer over 2 IPUs to the same bits as without it, the updates of IPU 1 calling builders first lowered on IPU 0', () => {
    const g = loadModelFile(path.join(EXAMPLES, 'transformer.tg'), { args: { layers: 2, per_ipu: 1, seq: 8, d_model: 8, heads: 2 } });
    const module = buildTrainingModule(g, SETTINGS, makeOptimizer('Adam', { lr: 0.01 })).module;
    const host = hostCode(module, true);
    const ipus = [...host.matchAll(/= layer_\d+\(d, d\.ipu\[(\d+)\]/g)].map((m) => m[1]);
    expect(new Set(ipus)).toEqual(new Set(['0', '1']));
    expectSameBits(g, module, 2);
  });

  it('leaves a graph without repeated layers alone', () => {
    const g = loadModelFile(path.join(EXAMPLES, 'mlp.tg'));
    const m = buildTrainingModule(g, SETTINGS, makeOptimizer('SGD', { lr: 0.01 })).module;
    expect(calls(hostCode(m, true))).toBe(0);
    expect(hostCode(m, true)).toBe(hostCode(m, false));
  });

  it('is switched off by _Popart.set("enableOutlining", False)', () => {
    const opts = new Options();
    expect(compileOptionsFrom(opts).outline).toBe(true);
    opts._Popart.set('enableOutlining', false);
    expect(compileOptionsFrom(opts).outline).toBe(false);
    expect(opts.toString()).toContain('_Popart.set("enableOutlining", False)');
    expect(() => opts._Popart.set('enableOutlining', 'yes')).toThrow(/enableOutlining/);
  });

  it('a 12-layer encoder trained on 4 IPUs: the fullest tile is no fuller, and recomputation still halves the peak', () => {
    const sharded = [trainedEncoder(4, 0, false), trainedEncoder(4, 0, true)];
    expect(sharded[1]!.maxTileBytes).toBeLessThanOrEqual(sharded[0]!.maxTileBytes);
    const kept = trainedEncoder(1, 0, true).perIpu[0]!;
    const recomputed = trainedEncoder(1, 4, true).perIpu[0]!;
    expect(recomputed.peakLiveBytes).toBeLessThan(0.6 * kept.peakLiveBytes);
  });

  it('trains a 3-layer transformer to the same bits as without it, through functions and builders', () => {
    // three layers on IPU 0 over a long sequence of narrow vectors: the attention's working memory
    // dwarfs the weights, so the forward layers share a poplar::Function; the backward ones read
    // the softmax values their forward layer saved, a large share of what they use, so they share
    // builders (no copies), as does each weight's update, all state
    const g = loadModelFile(path.join(EXAMPLES, 'transformer.tg'), { args: { layers: 3, per_ipu: 3, seq: 64, d_model: 8, heads: 2 } });
    const module = buildTrainingModule(g, SETTINGS, makeOptimizer('Adam', { lr: 0.01 })).module;
    const host = hostCode(module, true);
    expect(bodies(host, 'function')).toBe(1);
    expect(bodies(host, 'builder')).toBeGreaterThanOrEqual(2);
    expectSameBits(g, module, 2);
  });
});
