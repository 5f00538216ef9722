import { OpDef } from '../opdef.js';

export const REDUCE_OPS: OpDef[] = [];
