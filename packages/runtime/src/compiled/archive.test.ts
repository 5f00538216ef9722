import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import type { BuildPlan } from '@tilegraph/codegen-poplar';
import { Tensor } from '@tilegraph/ir';
import { exportImage, loadExecutableBytes, writeExport } from './archive.js';

/**
 * The exported-executable format without a build: a stand-in `step` file and a plan that lists
 * only state (all the loader reads of it before the executable runs).
 */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-archive-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const dir = path.join(tmp, 'built');
fs.mkdirSync(dir);
fs.writeFileSync(path.join(dir, 'step'), '#!/bin/sh\nexit 3\n');
const cacheDir = path.join(tmp, 'cache');

const entry = (name: string, dtype: 'float32' | 'int32' | 'float16', shape: number[], storage: 'on_chip' | 'transient' = 'on_chip') => ({ name, index: 0, dtype, shape, role: 'weight', ipu: 0, storage });
const plan = {
  module: 'archive-test',
  state: [entry('w', 'float32', [3, 5]), entry('w.m', 'float32', [3, 5]), entry('count', 'int32', [2]), entry('h', 'float16', [4]), entry('work', 'float32', [8], 'transient')],
} as unknown as BuildPlan;

const w = new Tensor('float32', [3, 5], Float32Array.from({ length: 15 }, (_, i) => (i - 7) / 3));
const initial = new Map<string, Tensor>([
  ['w', w],
  ['w.m', Tensor.zeros('float32', [3, 5])],
  ['count', new Tensor('int32', [2], Int32Array.from([0, 7]))],
  ['h', Tensor.zeros('float16', [4])],
]);

/** The header of an exported file (format 4: magic, CRC-32, header length), and where its blobs start. */
function header(bytes: Buffer): { head: { format: number; state: { name: string; zeros?: true; size?: number }[] }; base: number } {
  const len = bytes.readUInt32LE(12);
  return { head: JSON.parse(bytes.subarray(16, 16 + len).toString('utf8')), base: 16 + len };
}

/** A file around `head` and `blobs` with a valid checksum: a sha256 digest (formats 2 and 3) or a CRC-32 (format 4), as zlib's crc32 computes it. */
function forge(format: number, head: object, blobs: Buffer): Buffer {
  const h = Buffer.from(JSON.stringify(head));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(h.length);
  const body = Buffer.concat([len, h, blobs]);
  const sum = format >= 4 ? Buffer.alloc(4) : createHash('sha256').update(body).digest();
  if (format >= 4) sum.writeUInt32LE(crc32(body));
  return Buffer.concat([Buffer.from(`TGEXE${String(format).padStart(3, '0')}`), sum, body]);
}

test('all-zero state is listed without bytes and loads as zeros; other state round-trips bit for bit', () => {
  const bytes = exportImage({ dir, plan }, initial);
  expect(bytes.subarray(0, 8).toString()).toBe('TGEXE004');
  const { head } = header(bytes);
  expect(head.state.map((s) => [s.name, s.zeros === true])).toEqual([
    ['w', false],
    ['w.m', true],
    ['count', false],
    ['h', true],
  ]);
  // the step file, w's 60 bytes and count's 8: nothing for the zeros
  expect(head.state.reduce((n, s) => n + (s.size ?? 0), 0)).toBe(68);
  const loaded = loadExecutableBytes(bytes, 'model.tgexe', { cacheDir });
  expect(Array.from(loaded.image.initial.get('w')!.data)).toEqual(Array.from(w.data));
  expect(Array.from(loaded.image.initial.get('w.m')!.data)).toEqual(new Array(15).fill(0));
  expect(loaded.image.initial.get('w.m')!.shape).toEqual([3, 5]);
  expect(Array.from(loaded.image.initial.get('count')!.data)).toEqual([0, 7]);
  expect(loaded.image.initial.get('h')!.dtype).toBe('float16');
  expect(Array.from(loaded.image.initial.get('h')!.data)).toEqual([0, 0, 0, 0]);
  expect(loaded.image.initial.has('work')).toBe(false);
});

test('negative zero is not all-zero bytes, so it keeps its sign', () => {
  const neg = new Map(initial).set('w.m', new Tensor('float32', [3, 5], new Float32Array(15).fill(-0)));
  const loaded = loadExecutableBytes(exportImage({ dir, plan }, neg), 'neg.tgexe', { cacheDir });
  expect(Object.is(loaded.image.initial.get('w.m')!.data[0], -0)).toBe(true);
});

test('a format 2 file (every state tensor as bytes) still loads', () => {
  const bytes = exportImage({ dir, plan }, initial);
  const { head, base } = header(bytes);
  const blobs = [bytes.subarray(base)];
  let end = bytes.length - base;
  const state = head.state.map((s) => {
    if (!s.zeros) return s;
    const info = plan.state.find((x) => x.name === s.name)!;
    const size = info.shape.reduce((a, b) => a * b, 1) * (info.dtype === 'float16' ? 2 : 4);
    blobs.push(Buffer.alloc(size));
    const r = { name: s.name, offset: end, size };
    end += size;
    return r;
  });
  const old = forge(2, { ...head, format: 2, state }, Buffer.concat(blobs));
  const loaded = loadExecutableBytes(old, 'old.tgexe', { cacheDir });
  expect(Array.from(loaded.image.initial.get('w')!.data)).toEqual(Array.from(w.data));
  expect(Array.from(loaded.image.initial.get('w.m')!.data)).toEqual(new Array(15).fill(0));
});

test('zero-filled entries in a format 2 file, or malformed ones, are refused', () => {
  const bytes = exportImage({ dir, plan }, initial);
  const { head, base } = header(bytes);
  expect(() => loadExecutableBytes(forge(2, { ...head, format: 2 }, bytes.subarray(base)), 'f2.tgexe', { cacheDir })).toThrow(/state 'w.m' has no bytes/);
  const odd = { ...head, state: head.state.map((s) => (s.zeros ? { name: s.name, zeros: 'yes' } : s)) };
  expect(() => loadExecutableBytes(forge(3, { ...odd, format: 3 }, bytes.subarray(base)), 'odd.tgexe', { cacheDir })).toThrow(/state 'w.m' has no bytes/);
});

test('the file is the checksum of what follows it: a format 3 file (sha256) of the same header and blobs loads the same', () => {
  const bytes = exportImage({ dir, plan }, initial);
  const { head, base } = header(bytes);
  // the checksum is computed piece by piece as the file is assembled: the same as over the whole
  expect(forge(4, head, bytes.subarray(base)).equals(bytes)).toBe(true);
  const old = loadExecutableBytes(forge(3, { ...head, format: 3 }, bytes.subarray(base)), 'f3.tgexe', { cacheDir });
  const now = loadExecutableBytes(bytes, 'f4.tgexe', { cacheDir });
  for (const name of ['w', 'w.m', 'count', 'h']) expect(Array.from(old.image.initial.get(name)!.data)).toEqual(Array.from(now.image.initial.get(name)!.data));
  // the same executable and plan: one unpacked entry
  expect(old.image.dir).toBe(now.image.dir);
});

test('a file damaged anywhere after its magic (a flipped bit, a cut end) is refused', () => {
  const bytes = exportImage({ dir, plan }, initial);
  fc.assert(
    fc.property(fc.integer({ min: 8, max: bytes.length - 1 }), fc.integer({ min: 0, max: 7 }), (at, bit) => {
      const bad = Buffer.from(bytes);
      bad[at] ^= 1 << bit;
      expect(() => loadExecutableBytes(bad, 'bad.tgexe', { cacheDir })).toThrow(/checksum does not match|truncated header/);
    }),
    { numRuns: 200 },
  );
  expect(() => loadExecutableBytes(bytes.subarray(0, bytes.length - 1), 'cut.tgexe', { cacheDir })).toThrow(/checksum does not match/);
});

test('writeExport writes the bytes exportImage gives, through a temporary file', () => {
  const file = path.join(tmp, 'written.tgexe');
  writeExport(file, { dir, plan }, initial);
  expect(fs.readFileSync(file).equals(exportImage({ dir, plan }, initial))).toBe(true);
  expect(fs.readdirSync(tmp).filter((f) => f.endsWith('.tmp'))).toEqual([]);
});
