import { Graph, Tensor } from '@tilegraph/ir';
import { Options } from '@tilegraph/frontend';
import { BackendFactory, DataLoader, Dataset, InferenceModel, inferenceModel } from '@tilegraph/runtime';
import { inputRoles } from './synthetic.js';

export interface EvalResult {
  /** Mean loss over the evaluated micro-batches (undefined when the model outputs no loss). */
  readonly loss?: number;
  /** Share of labels the arg-max over dim 1 of the class scores names. */
  readonly accuracy?: number;
  /** Samples evaluated (whole micro-batches; the rest of the data set is left out). */
  readonly samples: number;
  readonly leftOut: number;
}

/** Counts the labels the arg-max over dim 1 of `scores` [B, C, ...] names; `labels` is [B, ...]. */
export function countCorrect(scores: Tensor, labels: Tensor, ignore?: number): { correct: number; total: number } {
  const [B, C] = [scores.shape[0] ?? 1, scores.shape[1] ?? 1];
  const inner = scores.size / Math.max(1, B * C);
  let correct = 0;
  let total = 0;
  for (let b = 0; b < B; b++) {
    for (let r = 0; r < inner; r++) {
      const label = labels.data[b * inner + r]!;
      if (label === ignore) continue;
      let best = 0;
      for (let c = 1; c < C; c++) if (scores.data[(b * C + c) * inner + r]! > scores.data[(b * C + best) * inner + r]!) best = c;
      total++;
      if (best === label) correct++;
    }
  }
  return { correct, total };
}

/** Evaluates a model on a data set with given weights: an inference session on the training's backend, built on first use. */
export class Evaluator {
  private session: InferenceModel | undefined;
  private readonly loader: DataLoader;
  private readonly label: { input: string; logits: string; ignore?: number } | undefined;

  constructor(
    private readonly graph: Graph,
    data: Dataset,
    microBatch: number,
    private readonly lossOutput: string | undefined,
    private readonly options: () => Options,
    private readonly backend: BackendFactory | undefined,
  ) {
    const whole = new Options();
    whole.Distributed.disable(); // the whole eval set in every process
    this.loader = new DataLoader(whole, data, { batchSize: microBatch, shuffle: false, dropLast: true });
    for (const [input, l] of inputRoles(graph).labels) {
      if (l.logits && !this.label) this.label = { input, logits: l.logits, ...(l.ignore !== undefined ? { ignore: l.ignore } : {}) };
    }
  }

  get hasAccuracy(): boolean {
    return this.label !== undefined;
  }

  evaluate(weights: Readonly<Record<string, Tensor>>): EvalResult {
    this.session ??= inferenceModel(this.graph, this.options(), this.backend ? { backend: this.backend } : {});
    this.session.loadStateDict(weights);
    let lossSum = 0;
    let runs = 0;
    let correct = 0;
    let total = 0;
    let hasLoss = false;
    for (const batch of this.loader) {
      const out = this.session.run(batch);
      const loss = this.lossOutput !== undefined ? out[this.lossOutput] : undefined;
      if (loss) {
        hasLoss = true;
        lossSum += loss.toArray().reduce((a, b) => a + b, 0) / loss.size;
      }
      runs++;
      if (this.label && out[this.label.logits]) {
        const c = countCorrect(out[this.label.logits]!, batch[this.label.input]!, this.label.ignore);
        correct += c.correct;
        total += c.total;
      }
    }
    return {
      ...(hasLoss ? { loss: lossSum / Math.max(1, runs) } : {}),
      ...(this.label && total > 0 ? { accuracy: correct / total } : {}),
      samples: this.loader.samplesPerEpoch,
      leftOut: this.loader.dataset.length - this.loader.samplesPerEpoch,
    };
  }
}
