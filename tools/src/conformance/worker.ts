import { parentPort } from 'node:worker_threads';
import { runConformanceTest } from './harness.js';

/** A conformance worker: runs the test folders it is sent, one at a time, and posts each result. */
parentPort?.on('message', (m: { dir: string }) => {
  parentPort!.postMessage(runConformanceTest(m.dir));
});
