/** Tensor locations: TensorLocationSettings (on/off chip, replicated tensor sharding). */
import { OptionsError, checkBool, checkNonNegativeInt, fmt, isPlainObject } from './checks.js';
import { checkKeys } from './execution.js';

/** Settings for one class of tensors (activations, weights, optimiser state, accumulators). */
export interface TensorLocationValues {
  /** true: on-chip memory; false: off-chip (streaming) memory; absent: the compiler decides. */
  onChip?: boolean;
  useReplicatedTensorSharding?: boolean;
  minElementsForOffChip?: number;
  minElementsForReplicatedTensorSharding?: number;
  useIOTilesToLoad?: boolean;
  useIOTilesToStore?: boolean;
}

const LOCATION_KEYS: readonly (keyof TensorLocationValues)[] = [
  'onChip',
  'useReplicatedTensorSharding',
  'minElementsForOffChip',
  'minElementsForReplicatedTensorSharding',
  'useIOTilesToLoad',
  'useIOTilesToStore',
];

/** Where a class of tensors is stored; pass to the `TensorLocations.set*Location` setters. */
export class TensorLocationSettings {
  private v: TensorLocationValues = {};

  /** Below this many elements a tensor is never moved off chip. */
  minElementsForOffChip(minElements: number): this {
    this.v.minElementsForOffChip = checkNonNegativeInt('TensorLocationSettings.minElementsForOffChip', minElements);
    return this;
  }

  /** Only shard (RTS) tensors with more than this many elements. */
  minElementsForReplicatedTensorSharding(minElements: number): this {
    this.v.minElementsForReplicatedTensorSharding = checkNonNegativeInt(
      'TensorLocationSettings.minElementsForReplicatedTensorSharding',
      minElements,
    );
    return this;
  }

  /** true: on-chip memory; false: off-chip memory; null: leave it to the compiler. */
  useOnChipStorage(use: boolean | null = true): this {
    if (use === null) delete this.v.onChip;
    else this.v.onChip = checkBool('TensorLocationSettings.useOnChipStorage', use);
    return this;
  }

  /** Shard the tensor across replicas (weights and optimiser state). */
  useReplicatedTensorSharding(use = true): this {
    this.v.useReplicatedTensorSharding = checkBool('TensorLocationSettings.useReplicatedTensorSharding', use);
    return this;
  }

  /** Load the tensor through IO tiles instead of compute tiles. */
  useIOTilesToLoad(use = true): this {
    this.v.useIOTilesToLoad = checkBool('TensorLocationSettings.useIOTilesToLoad', use);
    return this;
  }

  /** Store the tensor through IO tiles (relevant for sharded tensors). */
  useIOTilesToStore(use = true): this {
    this.v.useIOTilesToStore = checkBool('TensorLocationSettings.useIOTilesToStore', use);
    return this;
  }

  /** The settings made so far, as a plain object. */
  toDict(): TensorLocationValues {
    return { ...this.v };
  }

  static fromDict(v: unknown, where = 'TensorLocationSettings'): TensorLocationSettings {
    if (!isPlainObject(v)) throw new OptionsError(`expected a tensor location object, got ${fmt(v)}`, where);
    checkKeys(v, LOCATION_KEYS, where);
    const s = new TensorLocationSettings();
    if (v['onChip'] !== undefined) s.useOnChipStorage(v['onChip'] as boolean);
    if (v['useReplicatedTensorSharding'] !== undefined) {
      s.useReplicatedTensorSharding(v['useReplicatedTensorSharding'] as boolean);
    }
    if (v['minElementsForOffChip'] !== undefined) s.minElementsForOffChip(v['minElementsForOffChip'] as number);
    if (v['minElementsForReplicatedTensorSharding'] !== undefined) {
      s.minElementsForReplicatedTensorSharding(v['minElementsForReplicatedTensorSharding'] as number);
    }
    if (v['useIOTilesToLoad'] !== undefined) s.useIOTilesToLoad(v['useIOTilesToLoad'] as boolean);
    if (v['useIOTilesToStore'] !== undefined) s.useIOTilesToStore(v['useIOTilesToStore'] as boolean);
    return s;
  }

  /** The settings as an options-file expression. */
  describe(): string {
    const v = this.v;
    let s = 'TensorLocationSettings()';
    if (v.onChip !== undefined) s += `.useOnChipStorage(${pyBool(v.onChip)})`;
    if (v.useReplicatedTensorSharding !== undefined) {
      s += `.useReplicatedTensorSharding(${pyBool(v.useReplicatedTensorSharding)})`;
    }
    if (v.minElementsForOffChip !== undefined) s += `.minElementsForOffChip(${v.minElementsForOffChip})`;
    if (v.minElementsForReplicatedTensorSharding !== undefined) {
      s += `.minElementsForReplicatedTensorSharding(${v.minElementsForReplicatedTensorSharding})`;
    }
    if (v.useIOTilesToLoad !== undefined) s += `.useIOTilesToLoad(${pyBool(v.useIOTilesToLoad)})`;
    if (v.useIOTilesToStore !== undefined) s += `.useIOTilesToStore(${pyBool(v.useIOTilesToStore)})`;
    return s;
  }
}

export function pyBool(b: boolean): string {
  return b ? 'True' : 'False';
}
