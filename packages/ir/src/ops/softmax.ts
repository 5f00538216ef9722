import { OpDef } from '../opdef.js';

export const SOFTMAX_OPS: OpDef[] = [];
