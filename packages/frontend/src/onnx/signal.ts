import { Tensor, Value } from '@tilegraph/ir';
import { NodeContext } from './context.js';
import { irDTypeOf } from './tensor.js';

/** Signal-processing ops whose results are tables known at import. */

const mel = (hz: number): number => 2595 * Math.log10(1 + hz / 700);
const hertz = (m: number): number => 700 * (Math.pow(10, m / 2595) - 1);

/**
 * MelWeightMatrix [dft_length/2 + 1, num_mel_bins]: triangular filters between mel-spaced
 * frequency bins, computed at import as the specification's reference computes them (bin edges
 * floored to DFT bins; a filter whose rising edge is empty is 1 at its centre).
 */
export function melWeightMatrix(c: NodeContext): Value {
  const bins = c.constScalar(0, 'num_mel_bins');
  const dftLength = c.constScalar(1, 'dft_length');
  const sampleRate = c.constScalar(2, 'sample_rate');
  const [lower] = c.constFloats(3, 'lower_edge_hertz');
  const [upper] = c.constFloats(4, 'upper_edge_hertz');
  if (bins < 1 || dftLength < 1 || sampleRate < 1) c.fail(`num_mel_bins, dft_length and sample_rate must be positive`);
  if (!(lower! >= 0 && upper! > lower!)) c.fail(`needs 0 <= lower_edge_hertz < upper_edge_hertz, got ${lower} and ${upper}`);
  const outType = c.int('output_datatype', 1);
  const dtype = irDTypeOf(outType);
  if (!dtype) c.unsupported(`output_datatype ${outType} is not a type the IR holds`);
  const spectrum = Math.floor(dftLength / 2) + 1;
  const lo = mel(lower!);
  const step = (mel(upper!) - lo) / (bins + 2);
  const edge = [...Array(bins + 2).keys()].map((i) => Math.floor(((dftLength + 1) * hertz(i * step + lo)) / sampleRate));
  if (edge.some((b, i) => b < 0 || b > spectrum || (i <= bins && b === spectrum))) c.fail(`the filters reach beyond the ${spectrum} DFT bins (upper_edge_hertz above sample_rate / 2?)`);
  const out = new Array<number>(spectrum * bins).fill(0);
  for (let i = 0; i < bins; i++) {
    const [left, centre, right] = [edge[i]!, edge[i + 1]!, edge[i + 2]!];
    if (centre === left) out[centre * bins + i] = 1;
    else for (let j = left; j <= centre; j++) out[j * bins + i] = (j - left) / (centre - left);
    for (let j = centre; j < right; j++) out[j * bins + i] = (right - j) / (right - centre);
  }
  const y = c.e.constant(Tensor.from(dtype, [spectrum, bins], out));
  c.setOnnxType(y, outType);
  return y;
}
