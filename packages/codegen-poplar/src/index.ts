export { generatePoplar, generatePoplarSteps } from './generate.js';
export { GENERATED_FILES, hostUnits } from './host.js';
export type { BuildPlan, GeneratedSources } from './generate.js';
export type { DeviceChoice, GenerateOptions, HostFunctionInfo, PartialsType } from './context.js';
export { deviceIpus } from './context.js';
export { DECOMPOSED_OPS, LOWERED_OPS } from './lower/index.js';
export { GC200, formatBytes, linearMapping, sweepTiles } from './memory.js';
export type { IpuMemory, LiveTensor, MemoryReport, TileSweep } from './memory.js';
export { cppComment, cppIdentifier, cppStringLiteral, safeFileName, shortHash, IdentifierTable } from './sanitize.js';
export {
  GC200_COST_MODEL,
  ampCycles,
  elementwiseCycles,
  estimateGraphCycles,
  estimateModuleCycles,
  estimateOp,
  estimatePipeline,
  exchangeCycles,
  executionCounts,
  interIpuCycles,
} from './estimate.js';
export type { CostModel, EstimateOptions, GraphEstimate, OpEstimate, PipelineCycleEstimate, PipelineEstimate, PipelineSchedule } from './estimate.js';
