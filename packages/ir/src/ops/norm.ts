import { OpDef } from '../opdef.js';

export const NORM_OPS: OpDef[] = [];
