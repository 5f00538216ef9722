import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { GraphBuilder, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { buildKey, publish } from './build.js';
import type { Toolchain } from './toolchain.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-cache-test-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function entry(name: string, marker: string): string {
  const dir = path.join(tmp, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'step'), marker);
  fs.writeFileSync(path.join(dir, 'complete'), '');
  return dir;
}

describe('executable cache entries', () => {
  test('the first finished build wins; a later one is discarded', () => {
    const final = path.join(tmp, 'exe-a');
    publish(entry('.build-1', 'first'), final);
    publish(entry('.build-2', 'second'), final);
    expect(fs.readFileSync(path.join(final, 'step'), 'utf8')).toBe('first');
    expect(fs.existsSync(path.join(tmp, '.build-2'))).toBe(false);
  });

  test('a folder without the completion marker is replaced', () => {
    const final = path.join(tmp, 'exe-b');
    fs.mkdirSync(final);
    fs.writeFileSync(path.join(final, 'step'), 'half-written');
    publish(entry('.build-3', 'whole'), final);
    expect(fs.readFileSync(path.join(final, 'step'), 'utf8')).toBe('whole');
    expect(fs.existsSync(path.join(final, 'complete'))).toBe(true);
  });

  test('the key covers sources, toolchain and options', () => {
    const b = new GraphBuilder('g');
    b.output('y', b.op('neg', [b.input('x', 'float32', [2])]));
    const graphs = new Map([['g', b.graph]]);
    const m = { name: 'k', graphs, program: seq(streamIn(['x']), execute('g')), replicationFactor: 1, variables: collectVariables(graphs) };
    const emu: Toolchain = { kind: 'emulation', cxx: 'g++', node: 'node', poplarHost: '/x', version: 'v1' };
    const sources = generatePoplar(m);
    const k = buildKey(sources, emu);
    expect(buildKey(generatePoplar(m), emu)).toBe(k);
    expect(buildKey(sources, { ...emu, version: 'v2' })).not.toBe(k);
    expect(buildKey(generatePoplar(m, { availableMemoryProportion: 0.3 }), emu)).toBe(k); // no matmul: same code
    expect(buildKey(generatePoplar({ ...m, replicationFactor: 2 }), emu)).not.toBe(k);
  });
});
