import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Tensor } from '@tilegraph/ir';
import { loadWeights, saveWeights } from './weights.js';

/**
 * Weights beyond what one string or buffer holds: JSON.stringify of the whole state failed with
 * "Invalid string length" above ~25 M parameters. 100 M float32 parameters (400 MB) go through
 * safetensors both ways; 30 M through JSON (about 600 MB of text) are written and their ends checked
 * (reading it back takes as long again; the JSON reader is the same streaming code at any size).
 */
test('100 M parameters as safetensors, 30 M as JSON', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-weights-large-'));
  try {
    const n = 25_000_000;
    // a tile of exact float32 values with full-length decimal forms, copied: filling 100 M values one by one is slow here
    const tile = new Float32Array(1 << 20);
    for (let i = 0; i < tile.length; i++) tile[i] = (Math.imul(i, 2654435761) >>> 8) * 2 ** -24 - 0.5;
    const state: Record<string, Tensor> = {};
    for (let k = 0; k < 4; k++) {
      const d = new Float32Array(n);
      for (let i = 0; i < n; i += tile.length) d.set(tile.subarray(0, Math.min(tile.length, n - i)), i);
      d[k] = k; // each tensor differs
      state[`layer${k}.weight`] = new Tensor('float32', [n / 1000, 1000], d);
    }
    const st = path.join(dir, 'w.safetensors');
    saveWeights(st, state);
    expect(fs.statSync(st).size).toBeGreaterThan(400_000_000);
    const back = loadWeights(st);
    for (const [name, t] of Object.entries(state)) {
      const b = back[name]!;
      expect(b.shape).toEqual(t.shape);
      expect(Buffer.from(b.data.buffer).equals(Buffer.from(t.data.buffer))).toBe(true);
    }
    fs.rmSync(st);

    const json = path.join(dir, 'w.json');
    const part = { a: state['layer0.weight']!, b: new Tensor('float32', [5_000_000], state['layer1.weight']!.data.subarray(0, 5_000_000)) };
    saveWeights(json, part);
    const size = fs.statSync(json).size;
    expect(size).toBeGreaterThan(2 ** 29); // longer than the longest string V8 makes
    const fd = fs.openSync(json, 'r');
    const head = Buffer.alloc(256);
    const tail = Buffer.alloc(64);
    fs.readSync(fd, head, 0, 256, 0);
    fs.readSync(fd, tail, 0, 64, size - 64);
    fs.closeSync(fd);
    const a = part.a.data;
    expect(head.toString('latin1').startsWith(`{"a":{"dtype":"float32","shape":[25000,1000],"data":[${a[0]},${a[1]},${a[2]},`)).toBe(true);
    const last = part.b.data[part.b.size - 1]!;
    expect(tail.toString('latin1').endsWith(`,${last}]}}`)).toBe(true);
    expect(fs.readdirSync(dir)).toEqual(['w.json']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 300_000);
