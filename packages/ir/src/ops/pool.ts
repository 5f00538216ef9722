import { OpDef } from '../opdef.js';

export const POOL_OPS: OpDef[] = [];
