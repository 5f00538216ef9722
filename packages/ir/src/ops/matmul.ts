import { OpDef } from '../opdef.js';

export const MATMUL_OPS: OpDef[] = [];
