import { OpDef } from '../opdef.js';

export const CONV_OPS: OpDef[] = [];
