import { ModelBuilder, Options } from '@tilegraph/frontend';
import { Tensor, tensorsIdentical } from '@tilegraph/ir';
import { referenceBackend } from './backend.js';
import { inferenceModel } from './models.js';
import { OutfeedItem } from './outfeed.js';

/**
 * Outfeeds (TF-IPU's outfeed queue): a run's output values are read while the run goes on. Not
 * by timing: when the reader holds the first value, the run has not settled and the device has
 * not produced the last iteration's values yet (the executable sends each copy as the device
 * makes it; the reference interpreter pauses after each execution).
 */

const ITER = 4;
function model() {
  const m = new ModelBuilder('feed');
  const x = m.input('x', 'float32', [2, 3]);
  const h = m.relu(m.linear(x, 3, 4, { name: 'fc' }));
  h.name = 'hidden';
  m.output('y', m.linear(h, 4, 2, { name: 'out' }));
  return m.graph;
}
const x = Tensor.from('float32', [2 * ITER, 3], Array.from({ length: 6 * ITER }, (_, i) => Math.sin(i)));
const rows = (t: Tensor, k: number, per: number) => new Tensor(t.dtype, [per, ...t.shape.slice(1)], t.data.slice(k * per * (t.size / t.shape[0]!), (k + 1) * per * (t.size / t.shape[0]!)));

for (const [name, settings] of [['compiled', {}], ['reference', { backend: referenceBackend }]] as const) {
  test(`each iteration's outputs are read while the run goes on (${name})`, async () => {
    const m = inferenceModel(model(), new Options().deviceIterations(ITER).anchorTensor('h', 'hidden'), settings);
    try {
      await m.compileAsync();
      const feed = m.outfeed();
      expect(() => m.outfeed()).toThrow('the next run already has an outfeed');
      let settled = false;
      const run = m.runAsync({ x }).finally(() => {
        settled = true;
      });
      const items: OutfeedItem[] = [];
      for await (const item of feed) {
        if (items.length === 0) {
          expect(settled).toBe(false);
          // the device has not made the last iteration's values yet
          expect(feed.produced).toBeLessThan(2 * ITER);
        }
        items.push(item);
      }
      const out = await run;
      // every iteration's output and anchor, in the order the device made them
      expect(items.map((i) => `${i.anchor ? 'anchor ' : ''}${i.output}#${i.index}`).sort()).toEqual(
        [...Array.from({ length: ITER }, (_, k) => `y#${k}`), ...Array.from({ length: ITER }, (_, k) => `anchor h#${k}`)].sort(),
      );
      expect(items.filter((i) => i.output === 'y').map((i) => i.index)).toEqual([0, 1, 2, 3]);
      for (const i of items.filter((i) => i.output === 'y')) expect(tensorsIdentical(i.value, rows(out['y']!, i.index, 2))).toBe(true);
      const anchored = m.getAnchoredTensor('h');
      for (const i of items.filter((i) => i.anchor)) expect(tensorsIdentical(i.value, rows(anchored, i.index, 2))).toBe(true);
      // the next run without an outfeed runs as before
      expect(tensorsIdentical((await m.runAsync({ x }))['y']!, out['y']!)).toBe(true);
    } finally {
      m.dispose();
    }
  }, 300_000);

  test(`a run keeps the inputs it started with when the caller changes them while it goes on (${name})`, async () => {
    const m = inferenceModel(model(), new Options().deviceIterations(ITER), settings);
    try {
      const want = (await m.runAsync({ x }))['y']!;
      const mine = new Tensor(x.dtype, x.shape, x.data.slice());
      const feed = m.outfeed();
      const run = m.runAsync({ x: mine });
      for await (const item of feed) if (item.index === 0) mine.data.fill(100); // later iterations not made yet
      expect(tensorsIdentical((await run)['y']!, want)).toBe(true);
    } finally {
      m.dispose();
    }
  }, 300_000);
}

test('a failed run ends its outfeed with the error; run() fills it when it returns', async () => {
  const m = inferenceModel(model(), new Options().deviceIterations(ITER), { backend: referenceBackend });
  const failing = m.outfeed();
  await expect(m.runAsync({ x: Tensor.zeros('float32', [3, 3]) })).rejects.toThrow("input 'x'");
  await expect(failing.next()).rejects.toThrow("input 'x'");
  const feed = m.outfeed();
  m.run({ x });
  const got: number[] = [];
  for await (const i of feed) got.push(i.index);
  expect(got).toEqual([0, 1, 2, 3]);
});
