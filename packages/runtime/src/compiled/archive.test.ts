import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import type { BuildPlan } from '@tilegraph/codegen-poplar';
import { Tensor } from '@tilegraph/ir';
import { Module, VariableInfo, runToEnd } from '@tilegraph/ir';
import { exportImage, loadExecutableBytes } from './archive.js';
import { initialState } from './backend.js';
import { AtomicFile, ImageWriter, writeInitialState } from './image-file.js';

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

/** The header of an exported file (format 4: magic, header CRC-32, length and offset; blobs; header) and its blobs. */
function header(bytes: Buffer): { head: { format: number; state: { name: string; zeros?: true; size?: number }[] }; blobs: Buffer } {
  const at = Number(bytes.readBigUInt64LE(16));
  return { head: JSON.parse(bytes.subarray(at, at + bytes.readUInt32LE(12)).toString('utf8')), blobs: bytes.subarray(24, at) };
}

/**
 * A file of `head` and `blobs` with valid checksums, written out from the format's description:
 * formats 2 and 3, the header first and a sha256 of all after the magic; format 4, the blobs
 * first and the header last, with zlib's CRC-32 of the header in the prefix (the header lists the blobs' own).
 */
function forge(format: number, head: object, blobs: Buffer): Buffer {
  const h = Buffer.from(JSON.stringify(head));
  const magic = Buffer.from(`TGEXE${String(format).padStart(3, '0')}`);
  if (format >= 4) {
    const prefix = Buffer.alloc(16);
    prefix.writeUInt32LE(crc32(h), 0);
    prefix.writeUInt32LE(h.length, 4);
    prefix.writeBigUInt64LE(BigInt(24 + blobs.length), 8);
    return Buffer.concat([magic, prefix, blobs, h]);
  }
  const len = Buffer.alloc(4);
  len.writeUInt32LE(h.length);
  const body = Buffer.concat([len, h, blobs]);
  return Buffer.concat([magic, createHash('sha256').update(body).digest(), body]);
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
  const { head, blobs: all } = header(bytes);
  const blobs = [all];
  let end = all.length;
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
  const { head, blobs } = header(bytes);
  expect(() => loadExecutableBytes(forge(2, { ...head, format: 2 }, blobs), 'f2.tgexe', { cacheDir })).toThrow(/state 'w.m' has no bytes/);
  const odd = { ...head, state: head.state.map((s) => (s.zeros ? { name: s.name, zeros: 'yes' } : s)) };
  expect(() => loadExecutableBytes(forge(3, { ...odd, format: 3 }, blobs), 'odd.tgexe', { cacheDir })).toThrow(/state 'w.m' has no bytes/);
  expect(() => loadExecutableBytes(forge(4, odd, blobs), 'odd4.tgexe', { cacheDir })).toThrow(/state 'w.m' has no bytes/);
});

test('format 4 is the blobs with their CRC-32s, then the header with its own; a format 3 file of the same header and blobs loads the same', () => {
  const bytes = exportImage({ dir, plan }, initial);
  const { head, blobs } = header(bytes);
  expect(forge(4, head, blobs).equals(bytes)).toBe(true);
  const files = (head as unknown as { files: { offset: number; size: number; crc: number }[] }).files;
  for (const b of [...files, ...head.state.filter((x) => !x.zeros)] as { offset: number; size: number; crc: number }[]) expect(b.crc).toBe(crc32(blobs.subarray(b.offset, b.offset + b.size)));
  const old = loadExecutableBytes(forge(3, { ...head, format: 3 }, blobs), 'f3.tgexe', { cacheDir });
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
    { numRuns: 300 },
  );
  expect(() => loadExecutableBytes(bytes.subarray(0, bytes.length - 1), 'cut.tgexe', { cacheDir })).toThrow(/truncated header/);
});

test('the state drawn into a file while a build runs: the bytes exportImage gives for the initial state, written through a temporary file', () => {
  const vars = new Map<string, VariableInfo>([
    ['w', { name: 'w', type: { dtype: 'float32', shape: [3, 5] }, role: 'weight', init: { kind: 'init', fn: 'normal', args: { seed: 2 } } }],
    ['w.m', { name: 'w.m', type: { dtype: 'float32', shape: [3, 5] }, role: 'optimizer', init: { kind: 'init', fn: 'zeros', args: {} } }],
    ['count', { name: 'count', type: { dtype: 'int32', shape: [2] }, role: 'counter', init: new Tensor('int32', [2], Int32Array.from([0, 7])) }],
    ['h', { name: 'h', type: { dtype: 'float16', shape: [4] }, role: 'weight', init: { kind: 'init', fn: 'uniform', args: { seed: 1 } } }],
    ['work', { name: 'work', type: { dtype: 'float32', shape: [8] }, role: 'weight', init: { kind: 'init', fn: 'ones', args: {} }, location: { transient: true } }],
  ]);
  const module = { name: 'archive-test', graphs: new Map(), program: { kind: 'sequence', body: [] }, replicationFactor: 1, variables: vars } as unknown as Module;
  const file = path.join(tmp, 'streamed.tgexe');
  // the temporary file of a writer that was killed (its process gone) is removed; a live one's is not
  const gone = spawnSync(process.execPath, ['-e', '']).pid!;
  const orphan = path.join(tmp, `.streamed.tgexe.${gone}.0123abcd.tmp`);
  const live = path.join(tmp, `.streamed.tgexe.${process.pid}.0123abcd.tmp`);
  fs.writeFileSync(orphan, 'left by a killed export');
  fs.writeFileSync(live, 'being written');
  const out = new AtomicFile(file);
  expect([fs.existsSync(orphan), fs.existsSync(live)]).toEqual([false, true]);
  fs.rmSync(live);
  const writer = new ImageWriter(out);
  const state = runToEnd(writeInitialState(module, writer));
  writer.finish(plan, writer.files(dir), state);
  expect(fs.readdirSync(tmp).filter((f) => f.endsWith('.tmp'))).toHaveLength(1);
  out.commit();
  expect(fs.readdirSync(tmp).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  expect(fs.readFileSync(file).equals(exportImage({ dir, plan }, initialState(module)))).toBe(true);
});
