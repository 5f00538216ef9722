import { Tensor, Value, isFloat } from '@tilegraph/ir';
import { NodeContext } from './context.js';

/** Classical machine-learning ops (the ai.onnx.ml domain, n-gram features), as graphs of IR ops. */

/** Most tree nodes (branches and leaves) a TreeEnsemble may unfold into ops. */
const MAX_TREE_NODES = 20_000;

/**
 * TreeEnsemble-5: every branch's test becomes an element-wise comparison of one feature column,
 * every leaf the conjunction of the tests on its path, and a leaf adds (or takes the min/max of)
 * its weight where its path holds. Trees are walked as the specification's reference walks them,
 * which is also the order in which set-membership nodes take their sets.
 */
export function treeEnsemble(c: NodeContext): Value {
  const e = c.e;
  const x = c.input(0);
  if (x.type.shape.length !== 2 || !isFloat(x.type.dtype)) c.fail(`X must be a float [N, features] tensor, got ${x.type.dtype}[${x.type.shape.join(',')}]`);
  const [n, features] = x.type.shape as [number, number];
  const splits = Array.from(c.decodeTensorAttr('nodes_splits').tensor.data);
  const modes = Array.from(c.decodeTensorAttr('nodes_modes').tensor.data);
  const featureIds = c.ints('nodes_featureids');
  const trueIds = c.ints('nodes_truenodeids');
  const falseIds = c.ints('nodes_falsenodeids');
  const trueLeafs = c.ints('nodes_trueleafs');
  const falseLeafs = c.ints('nodes_falseleafs');
  const missingTrue = c.ints('nodes_missing_value_tracks_true', []);
  const targetIds = c.ints('leaf_targetids');
  const weights = Array.from(c.decodeTensorAttr('leaf_weights').tensor.data);
  const roots = c.ints('tree_roots');
  const members = c.has('membership_values') ? Array.from(c.decodeTensorAttr('membership_values').tensor.data) : [];
  const targets = c.int('n_targets');
  const aggregate = c.int('aggregate_function', 1);
  const post = c.int('post_transform', 0);
  if (post !== 0) c.unsupported(`post_transform ${post} is not supported (only 0, none)`);
  if (aggregate < 0 || aggregate > 3) c.fail(`unknown aggregate_function ${aggregate}`);
  const branches = splits.length;
  if ([modes, featureIds, trueIds, falseIds, trueLeafs, falseLeafs].some((a) => a.length !== branches)) c.fail(`the nodes_* attributes must all have ${branches} entries`);
  if (targetIds.length !== weights.length) c.fail(`leaf_targetids and leaf_weights must have the same length`);
  const column = (f: number): Value => {
    if (f < 0 || f >= features) c.fail(`a node tests feature ${f}, but X has ${features}`);
    return e.op('reshape', [e.op('slice', [x], { starts: [f], ends: [f + 1], axes: [1] })], { shape: [n] });
  };
  let nextMember = 0;
  const memberSet = (): number[] => {
    const set: number[] = [];
    while (nextMember < members.length && !Number.isNaN(members[nextMember]!)) set.push(members[nextMember++]!);
    nextMember++;
    return set;
  };
  const test = (i: number): Value => {
    const col = column(featureIds[i]!);
    const s = e.like(col, splits[i]!);
    const eq = () => e.op('equal', [col, s]);
    const or = (a: Value, b: Value) => e.op('or', [a, b]);
    // modes: 0 <=, 1 <, 2 >=, 3 >, 4 ==, 5 !=, 6 member of a set (NaN fails all but !=)
    const compare: Record<number, () => Value> = {
      0: () => or(e.op('less', [col, s]), eq()),
      1: () => e.op('less', [col, s]),
      2: () => or(e.op('greater', [col, s]), eq()),
      3: () => e.op('greater', [col, s]),
      4: eq,
      5: () => e.op('not', [eq()]),
      6: () => {
        const set = memberSet();
        return set.length === 0 ? e.filled('bool', [n], 0) : set.map((m) => e.op('equal', [col, e.like(col, m)])).reduce(or);
      },
    };
    const make = compare[modes[i]!];
    if (!make) c.fail(`unknown node mode ${modes[i]}`);
    const t = make();
    return missingTrue[i] ? e.op('or', [t, e.op('not', [e.op('equal', [col, col])])]) : t;
  };
  // per target, the leaves reached and their weights
  const reached: { where: Value | undefined; weight: number }[][] = Array.from({ length: targets }, () => []);
  let visited = 0;
  const walk = (i: number, leaf: boolean, path: Value | undefined): void => {
    if (++visited > MAX_TREE_NODES) c.unsupported(`the trees have more than ${MAX_TREE_NODES} nodes, more than the importer unfolds`);
    if (leaf) {
      const target = targetIds[i];
      if (target === undefined || weights[i] === undefined || target < 0 || target >= targets) c.fail(`leaf ${i} is missing or names target ${target} of ${targets}`);
      reached[target]!.push({ where: path, weight: weights[i]! });
      return;
    }
    if (i < 0 || i >= branches) c.fail(`node ${i} does not exist (${branches} nodes)`);
    const t = test(i);
    const both = (cond: Value) => (path ? e.op('and', [path, cond]) : cond);
    walk(trueIds[i]!, trueLeafs[i] !== 0, both(t));
    walk(falseIds[i]!, falseLeafs[i] !== 0, both(e.op('not', [t])));
  };
  for (const r of roots) {
    // a tree that is one leaf: both branches lead to the same leaf
    const single = trueLeafs[r] !== 0 && falseLeafs[r] !== 0 && trueIds[r] === falseIds[r];
    walk(r, single, undefined);
  }
  const dtype = x.type.dtype;
  const big = 3.4028234663852886e38;
  const init = aggregate === 2 ? big : aggregate === 3 ? -big : 0;
  const outs = reached.map((leaves) => {
    let acc = e.filled(dtype, [n], init);
    for (const { where, weight } of leaves) {
      const w = aggregate === 0 ? weight / roots.length : weight;
      const value = where ? e.op('where', [where, e.like(acc, w), e.like(acc, aggregate <= 1 ? 0 : init)]) : e.filled(dtype, [n], w);
      acc = aggregate <= 1 ? e.add(acc, value) : e.op(aggregate === 2 ? 'min' : 'max', [acc, value]);
    }
    return e.op('reshape', [acc], { shape: [n, 1] });
  });
  return outs.length === 1 ? outs[0]! : e.op('concat', outs, { axis: 1 });
}

/**
 * TfIdfVectorizer: counts of the pool's n-grams (with up to max_skip_count tokens skipped between
 * their items) in each row, weighted as the mode says. Every start position and skip is a strided
 * slice; a pool n-gram matches where all its items are equal. Unigrams are counted once, not once
 * per skip.
 */
export function tfIdfVectorizer(c: NodeContext): Value {
  const e = c.e;
  const x0 = c.input(0);
  const rank = x0.type.shape.length;
  if ((rank !== 1 && rank !== 2) || isFloat(x0.type.dtype) || x0.type.dtype === 'bool') c.fail(`X must be a 1-D or 2-D integer tensor (strings are not supported), got ${x0.type.dtype}[${x0.type.shape.join(',')}]`);
  const x = rank === 1 ? e.op('reshape', [x0], { shape: [1, x0.type.shape[0]!] }) : x0;
  const [rows, len] = x.type.shape as [number, number];
  const minN = c.int('min_gram_length');
  const maxN = c.int('max_gram_length');
  const maxSkip = c.int('max_skip_count');
  const mode = c.string('mode');
  if (!['TF', 'IDF', 'TFIDF'].includes(mode)) c.fail(`mode must be TF, IDF or TFIDF, got '${mode}'`);
  if (c.has('pool_strings')) c.unsupported(`string pools (pool_strings) are not supported`);
  const pool = c.ints('pool_int64s');
  const counts = c.ints('ngram_counts');
  const indexes = c.ints('ngram_indexes');
  const weights = c.floats('weights', []);
  if (!(minN >= 1 && maxN >= minN && maxSkip >= 0)) c.fail(`needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0`);
  const width = Math.max(...indexes, -1) + 1;
  let ordinal = 0;
  let out: Value | undefined;
  for (let n = 1; n <= counts.length; n++) {
    const from = counts[n - 1]!;
    const to = n < counts.length ? counts[n]! : pool.length;
    const grams = Math.floor((to - from) / n);
    const first = ordinal;
    ordinal += grams;
    if (n < minN || n > maxN || grams === 0) continue;
    if (first + grams > indexes.length) c.fail(`ngram_indexes has ${indexes.length} entries, fewer than the pool's n-grams`);
    // items [1, 1, G] of each pool n-gram, and where each n-gram's count goes in the output
    const item = (j: number) => e.constant(Tensor.from('int32', [1, 1, grams], [...Array(grams).keys()].map((g) => pool[from + g * n + j]!)));
    const place = Tensor.zeros('float32', [grams, width]);
    for (let g = 0; g < grams; g++) place.data[g * width + indexes[first + g]!] = 1;
    for (let skip = 0; skip <= (n === 1 ? 0 : maxSkip); skip++) {
      const positions = len - (n - 1) * (skip + 1);
      if (positions <= 0) break;
      let match: Value | undefined;
      for (let j = 0; j < n; j++) {
        const start = j * (skip + 1);
        const tokens = e.op('reshape', [e.op('slice', [x], { starts: [start], ends: [start + positions], axes: [1] })], { shape: [rows, positions, 1] });
        const eq = e.op('equal', [e.cast(tokens, 'int32'), item(j)]);
        match = match ? e.op('and', [match, eq]) : eq;
      }
      const found = e.op('reduce_sum', [e.cast(match!, 'float32')], { axes: [1], keepdims: false }); // [rows, G]
      const placed = e.op('matmul', [found, e.constant(place)]);
      out = out ? e.add(out, placed) : placed;
    }
  }
  let y = out ?? e.filled('float32', [rows, width], 0);
  const w = weights.length ? e.constant(Tensor.from('float32', [weights.length], weights)) : undefined;
  if (w && weights.length !== width) c.fail(`weights has ${weights.length} entries for ${width} outputs`);
  if (mode === 'IDF') y = e.cast(e.op('greater', [y, e.scalar('float32', 0)]), 'float32');
  if (mode !== 'TF' && w) y = e.mul(y, w);
  return rank === 1 ? e.op('reshape', [y], { shape: [width] }) : y;
}
