import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Options, OptionsError, RecomputationType } from './options.js';

/**
 * PopTorch selects PopART's automatic recomputation with `opts._Popart.set("autoRecomputation", n)`,
 * n the RecomputationType integer (0 None, 1 Standard, 2 NormOnly, 3 Pipeline, 4 RecomputeAll).
 */

function errorOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(OptionsError);
    return (e as Error).message;
  }
  throw new Error('expected an OptionsError');
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tg-recompute-opts-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('_Popart.set("autoRecomputation", n)', () => {
  test('PopART integers and RecomputationType members; the default is None', () => {
    expect(new Options().auto_recomputation).toBe(RecomputationType.None);
    const types = [0, 1, 2, 3, 4].map((n) => {
      const o = new Options();
      o._Popart.set('autoRecomputation', n);
      return o.auto_recomputation;
    });
    expect(types).toEqual(['None', 'Standard', 'NormOnly', 'Pipeline', 'RecomputeAll']);
    const o = new Options();
    expect(o._Popart.set('autoRecomputation', RecomputationType.NormOnly)).toBe(o._Popart);
    expect(o.auto_recomputation).toBe(RecomputationType.NormOnly);
  });

  test('bad values and keys name the setter and what is accepted', () => {
    const set = (k: string, v: unknown) => () => new Options()._Popart.set(k, v);
    expect(errorOf(set('autoRecomputation', 5))).toBe(
      '_Popart.set: autoRecomputation 5 is not a RecomputationType; expected 0 (None), 1 (Standard), 2 (NormOnly), 3 (Pipeline), 4 (RecomputeAll)',
    );
    expect(errorOf(set('autoRecomputation', 1.5))).toMatch(/^_Popart\.set: autoRecomputation 1\.5 is not a RecomputationType/);
    expect(errorOf(set('autoRecomputation', 'All'))).toBe(
      '_Popart.set("autoRecomputation"): unknown RecomputationType "All"; expected one of RecomputationType.None, RecomputationType.Standard, RecomputationType.NormOnly, RecomputationType.Pipeline, RecomputationType.RecomputeAll',
    );
    expect(errorOf(set('enableEngineCaching', true))).toBe('_Popart.set: unknown PopART option "enableEngineCaching"; the PopART options tilegraph acts on are: autoRecomputation, enableOutlining, automaticLossScalingSettings.enabled, automaticLossScalingSettings.binEdgeLocation, automaticLossScalingSettings.thresholdUpperCountProportion, automaticLossScalingSettings.updatePeriod');
  });

  test('an inference model is warned that recomputation has no effect', () => {
    const o = new Options();
    o._Popart.set('autoRecomputation', 1);
    expect(o.problemsFor('inference')).toEqual([
      { severity: 'warning', option: '_Popart.set("autoRecomputation")', message: 'recomputation applies to the backward pass; it has no effect on an inference model' },
    ]);
    expect(o.problemsFor('training')).toEqual([]);
  });
});

describe('autoRecomputation in options files and JSON', () => {
  test('setter lines, with an integer or an enum member', () => {
    expect(new Options().loadFromString('_Popart.set("autoRecomputation", 3)').auto_recomputation).toBe(RecomputationType.Pipeline);
    expect(new Options().loadFromString("_Popart.set('autoRecomputation', poptorch.RecomputationType.RecomputeAll)").auto_recomputation).toBe(RecomputationType.RecomputeAll);
    expect(errorOf(() => new Options().loadFromString('deviceIterations(2)\n_Popart.set("autoRecomputation", 9)', 'opts.cfg'))).toBe(
      'opts.cfg:2: _Popart.set: autoRecomputation 9 is not a RecomputationType; expected 0 (None), 1 (Standard), 2 (NormOnly), 3 (Pipeline), 4 (RecomputeAll)',
    );
    expect(errorOf(() => new Options().loadFromString('_Popart.sett("autoRecomputation", 1)', 'opts.cfg'))).toBe("opts.cfg:1: unknown _Popart setter 'sett'; did you mean 'set'?");
  });

  test('describe writes the setter line, which loads back', () => {
    const o = new Options().deviceIterations(2);
    o._Popart.set('autoRecomputation', 4);
    expect(o.describe()).toBe('deviceIterations(2)\n_Popart.set("autoRecomputation", RecomputationType.RecomputeAll)');
    const file = join(dir, 'opts.cfg');
    writeFileSync(file, o.describe());
    expect(Options.fromFile(file).toJSON()).toEqual(o.toJSON());
  });

  test('the JSON form is auto_recomputation, and reads back from a .json file', () => {
    const o = new Options();
    o._Popart.set('autoRecomputation', 1);
    expect(o.toJSON().auto_recomputation).toBe('Standard');
    const file = join(dir, 'opts.json');
    writeFileSync(file, JSON.stringify(o));
    expect(Options.fromFile(file).auto_recomputation).toBe(RecomputationType.Standard);
    expect(Options.fromJSON({ auto_recomputation: 'NormOnly' }).auto_recomputation).toBe(RecomputationType.NormOnly);
    expect(errorOf(() => Options.fromJSON({ auto_recomputation: 'Sometimes' }))).toMatch(
      /^options JSON, key auto_recomputation: _Popart\.set\("autoRecomputation"\): unknown RecomputationType "Sometimes"/,
    );
  });
});
