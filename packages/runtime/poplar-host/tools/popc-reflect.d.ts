// Types of popc-reflect.js as a module: the build driver imports it rather than starting a process for it.

/** A codelets file popc-reflect cannot read; its message names the file and line. */
export declare class ReflectError extends Error {}

/** One registered vertex: the names the host uses for it and its fields. */
export interface Registration {
  readonly names: readonly string[];
  readonly members: readonly string[];
}

/** Writes the registry for the codelets files `inputs` to `outFile`; warnings go to `warn` (default: stderr). */
export declare function generate(inputs: readonly string[], outFile: string, warn?: (msg: string) => void): Registration[];
