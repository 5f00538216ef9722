export { CompiledBackend, compiledBackend, compiledBackendWith, compiledBackendFor, compileOptionsFrom, compileModule, initialState } from './backend.js';
export type { CompiledBackendOptions, ExecutableImage } from './backend.js';
export { buildExecutable, buildKey, defaultCacheDir } from './build.js';
export type { BuildOptions, BuiltExecutable } from './build.js';
export { compileAndExport, loadExecutable, writeFileAtomic } from './archive.js';
export type { LoadedExecutable } from './archive.js';
export { findToolchain } from './toolchain.js';
export type { Toolchain } from './toolchain.js';
