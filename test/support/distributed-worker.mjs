// One process of test/distributed-mpi.test.ts. Trains a small MLP for a few steps on fixed data
// and writes what it saw as JSON: under mpirun as process p of P (each with R local replicas,
// Options.Distributed read from OpenMPI's environment), or alone with all P × R replicas.
// Every global replica g reads the same micro-batches either way, so the two must agree.
//   node distributed-worker.mjs <out.json> <localReplicas> <grouping: all|orthogonal|consecutive> [killAfterStep]
import fs from 'node:fs';
import { CommGroupType, ModelBuilder, Options, OutputMode } from '@tilegraph/frontend';
import { makeOptimizer } from '@tilegraph/passes';
import { trainingModel } from '@tilegraph/runtime';

const [out, localArg, grouping, killArg] = process.argv.slice(2);
const R = Number(localArg);
const opts = new Options().replicationFactor(R).outputMode(OutputMode.All);
const P = opts.Distributed.numProcesses;
const p = opts.Distributed.processId;
const N = P * R;
const B = 2;
const steps = 3;

const m = new ModelBuilder('mlp');
const x = m.input('x', 'float32', [B, 6]);
const y = m.input('y', 'int32', [B]);
const logits = m.output('logits', m.linear(m.relu(m.linear(x, 6, 8, { name: 'fc1' })), 8, 4, { name: 'fc2' }));
m.loss(m.crossEntropy(logits, y));

const groupings = {
  all: {},
  orthogonal: { 'fc1.weight': { type: CommGroupType.Orthogonal, shards: 2 } },
  consecutive: { 'fc2.weight': { type: CommGroupType.Consecutive, shards: 2 } },
};
const model = trainingModel(m.graph, opts, makeOptimizer('SGD', { lr: 0.2, momentum: 0.5 }), { replicaGrouping: groupings[grouping] });

// the micro-batch of global replica g at step s, the same in every layout
const sample = (s, g, i, j) => Math.sin(1.3 * s + 0.7 * g + 0.31 * i + 0.17 * j);
const losses = [];
for (let s = 0; s < steps; s++) {
  const xs = [];
  const ys = [];
  for (let r = 0; r < R; r++) {
    const g = p * R + r;
    for (let i = 0; i < B; i++) {
      for (let j = 0; j < 6; j++) xs.push(sample(s, g, i, j));
      ys.push((s + g + i) % 4);
    }
  }
  const { loss } = model.run({ x: Float32Array.from(xs), y: Int32Array.from(ys) });
  losses.push(Array.from(loss.data));
  if (killArg !== undefined && s + 1 === Number(killArg) && p === 1) process.kill(process.pid, 'SIGKILL');
}
const weights = Object.fromEntries(Object.entries(model.stateDict()).map(([k, t]) => [k, { shape: t.shape, data: Array.from(t.data) }]));
fs.writeFileSync(`${out}.tmp`, JSON.stringify({ process: p, processes: P, replicas: N, losses, weights }));
fs.renameSync(`${out}.tmp`, out);
model.dispose();
