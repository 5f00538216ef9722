import { Graph, GraphBuilder } from '@tilegraph/ir';
import { UsageError } from './diagnostics.js';

/** `--loss KIND`: the losses a model without one (an ONNX export returning logits) can be given. */
export const LOSS_FLAG = ['--loss <kind>', 'add a loss to a model that has none (an ONNX export returning logits): cross_entropy (labels input "labels") or mse (targets input "targets") on the first output'] as const;

/** Appends a loss on the first output: PyTorch's CrossEntropyLoss(mean) or MSELoss(mean). */
export function withLoss(g: Graph, kind: string): Graph {
  if (g.ops.some((op) => op.kind === 'identity_loss')) throw new UsageError('--loss: the model already has a loss');
  const out = g.outputs[0];
  if (!out) throw new UsageError('--loss: the model has no output to put a loss on');
  const b = new GraphBuilder(g);
  const t = out.value.type;
  let loss;
  if (kind === 'cross_entropy') {
    if (t.shape.length < 2) throw new UsageError(`--loss cross_entropy needs an output of class scores [batch, classes, ...]; '${out.name}' is ${t.dtype}[${t.shape}]`);
    const labels = b.input('labels', 'int32', [t.shape[0]!, ...t.shape.slice(2)]);
    loss = b.op('cross_entropy', [out.value, labels]);
  } else if (kind === 'mse') {
    const targets = b.input('targets', t.dtype, t.shape);
    const d = b.op('sub', [out.value, targets]);
    loss = b.op('reduce_mean', [b.op('mul', [d, d])]);
  } else {
    throw new UsageError(`--loss must be cross_entropy or mse, got '${kind}'`);
  }
  b.output('loss', b.op('identity_loss', [loss], { reduction: 'mean' }));
  return g;
}

