import type { OpDef } from './opdef.js';
import { ALL_OPS } from './ops/index.js';

/** Op definitions by name, built once from ALL_OPS; a duplicate name is a programming error. */
export class OpRegistry {
  private readonly byName = new Map<string, OpDef>();

  constructor(defs: readonly OpDef[]) {
    for (const d of defs) {
      if (this.byName.has(d.name)) throw new Error(`op '${d.name}' is defined twice`);
      this.byName.set(d.name, d);
    }
  }

  get(name: string): OpDef | undefined {
    return this.byName.get(name);
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  all(): OpDef[] {
    return [...this.byName.values()];
  }
}

let registry: OpRegistry | undefined;

export function opRegistry(): OpRegistry {
  registry ??= new OpRegistry(ALL_OPS);
  return registry;
}

export function getOpDef(name: string): OpDef | undefined {
  return opRegistry().get(name);
}
