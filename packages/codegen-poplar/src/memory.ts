import { DiagnosticError, Op, error, formatLocation } from '@tilegraph/ir';

/** The Mk2 GC200 IPU. */
export const GC200 = { tilesPerIpu: 1472, bytesPerTile: 638976, workersPerTile: 6 } as const;

/** Per-tile byte counts of the tensors and vertices a generated program allocates. */
export interface MemoryReport {
  readonly ipus: number;
  readonly tilesPerIpu: number;
  readonly bytesPerTile: number;
  /** Largest per-tile total and where it is. */
  readonly maxTileBytes: number;
  readonly maxTile: number;
  readonly totalBytes: number;
}

/**
 * The linear tile mapping mapTensorLinearly(graph, t, minElementsPerTile, grain) produces: the
 * flattened tensor cut into equal runs of whole grains (at least minElementsPerTile elements),
 * placed on tiles 0, 1, 2, ...
 */
export function linearMapping(elements: number, tiles: number, grain: number, minElements: number): { perTile: number; tilesUsed: number } {
  if (elements === 0) return { perTile: 0, tilesUsed: 0 };
  const grains = Math.ceil(elements / grain);
  let perTile = Math.ceil(grains / tiles) * grain;
  perTile = Math.max(perTile, Math.ceil(minElements / grain) * grain);
  return { perTile, tilesUsed: Math.ceil(elements / perTile) };
}

/**
 * Tracks per-tile memory while the program is generated, so that a model that cannot fit fails
 * before the (slow) build with the op, its source line and the figures.
 */
export class MemoryModel {
  private readonly usage: Float64Array[];
  private total = 0;

  constructor(
    readonly ipus: number,
    readonly tilesPerIpu: number = GC200.tilesPerIpu,
    readonly bytesPerTile: number = GC200.bytesPerTile,
    private readonly excludes: readonly string[] = [],
  ) {
    this.usage = Array.from({ length: ipus }, () => new Float64Array(tilesPerIpu));
  }

  /** A tensor spread linearly over the tiles of one IPU. */
  addLinear(ipu: number, elements: number, bytesPerElement: number, grain: number, minElements: number, blame: Op | undefined, what: string): void {
    if (elements === 0) return;
    const { perTile, tilesUsed } = linearMapping(elements, this.tilesPerIpu, grain, minElements);
    const u = this.usage[ipu]!;
    let worst = 0;
    for (let t = 0; t < tilesUsed; t++) {
      const n = Math.min(perTile, elements - t * perTile);
      u[t]! += n * bytesPerElement;
      if (u[t]! > u[worst]!) worst = t;
    }
    this.total += elements * bytesPerElement;
    this.check(ipu, worst, blame, what);
  }

  /** Bytes on one tile (constants, vertex state). */
  addTile(ipu: number, tile: number, bytes: number, blame: Op | undefined, what: string): void {
    this.usage[ipu]![tile]! += bytes;
    this.total += bytes;
    this.check(ipu, tile, blame, what);
  }

  /** Vertex state: `vertices` vertices of about `bytesEach` bytes spread like a linear tensor. */
  addVertices(ipu: number, tilesUsed: number, bytesEach: number): void {
    const u = this.usage[ipu]!;
    for (let t = 0; t < Math.min(tilesUsed, this.tilesPerIpu); t++) u[t]! += bytesEach;
    this.total += tilesUsed * bytesEach;
  }

  private check(ipu: number, tile: number, blame: Op | undefined, what: string): void {
    const used = this.usage[ipu]![tile]!;
    if (used <= this.bytesPerTile) return;
    const global = ipu * this.tilesPerIpu + tile;
    const where = blame ? `${blame.kind} at ${formatLocation(blame.loc, this.excludes)}` : what;
    const notes = [
      `while allocating ${what}${blame ? ` for ${blame.kind}` : ''}; the program needs ${formatBytes(this.total)} in all on ${this.ipus} IPU${this.ipus > 1 ? 's' : ''} of ${formatBytes(this.tilesPerIpu * this.bytesPerTile)} each`,
      'reduce the temporary memory of matmuls and convolutions with setAvailableMemoryProportion (e.g. 0.3)',
      'split large matmuls with serializedMatMul, recompute activations instead of keeping them (recomputation), or shard the model over more IPUs (set ipu annotations / pipelining)',
    ];
    throw new DiagnosticError(
      error(`Out of memory on tile ${global}: ${Math.ceil(used)} bytes used but tiles only have ${this.bytesPerTile} bytes of memory (${where})`, blame?.loc, notes),
    );
  }

  report(): MemoryReport {
    let maxTileBytes = 0;
    let maxTile = 0;
    this.usage.forEach((u, ipu) =>
      u.forEach((b, t) => {
        if (b > maxTileBytes) {
          maxTileBytes = b;
          maxTile = ipu * this.tilesPerIpu + t;
        }
      }),
    );
    return { ipus: this.ipus, tilesPerIpu: this.tilesPerIpu, bytesPerTile: this.bytesPerTile, maxTileBytes, maxTile, totalBytes: this.total };
  }
}

function formatBytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  if (n >= 2 ** 10) return `${(n / 2 ** 10).toFixed(1)} KiB`;
  return `${n} bytes`;
}
