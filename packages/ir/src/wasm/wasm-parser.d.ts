// The part of @webassemblyjs/wasm-parser's AST that the module check reads (the package ships no types).
declare module '@webassemblyjs/wasm-parser' {
  export interface Limit {
    readonly min: number;
    readonly max?: number;
  }
  export interface Signature {
    readonly params: readonly { readonly valtype: string }[];
    readonly results: readonly string[];
  }
  export type ModuleField =
    | { readonly type: 'ModuleImport'; readonly module: string; readonly name: string; readonly descr: { readonly type: string; readonly limits?: Limit } }
    | { readonly type: 'Memory'; readonly limits: Limit }
    | { readonly type: 'Func'; readonly signature: Signature }
    | { readonly type: 'ModuleExport'; readonly name: string; readonly descr: { readonly exportType: string; readonly id: { readonly value: number } } }
    | { readonly type: 'TypeInstruction' | 'Global' | 'Table' | 'Start' | 'Elem' | 'Data' };
  export interface Program {
    readonly body: readonly { readonly type: 'Module'; readonly fields: readonly ModuleField[] }[];
  }
  export function decode(
    buf: ArrayBuffer | Uint8Array,
    opts?: { ignoreCodeSection?: boolean; ignoreDataSection?: boolean; ignoreCustomNameSection?: boolean },
  ): Program;
}
