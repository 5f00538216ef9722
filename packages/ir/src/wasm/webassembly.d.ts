// The WebAssembly JS API as Node provides it (the part used here); @types/node does not declare it.
declare namespace WebAssembly {
  class Module {
    constructor(bytes: Uint8Array);
  }
  class Memory {
    constructor(desc: { initial: number; maximum?: number });
    readonly buffer: ArrayBuffer;
    grow(delta: number): number;
  }
  class Global {
    readonly value: unknown;
  }
  type ExportValue = ((...args: number[]) => unknown) | Memory | Global;
  class Instance {
    constructor(module: Module, imports: Record<string, Record<string, Memory>>);
    readonly exports: Record<string, ExportValue>;
  }
  function validate(bytes: Uint8Array): boolean;
}
