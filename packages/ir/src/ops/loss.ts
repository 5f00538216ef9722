import { OpDef } from '../opdef.js';

export const LOSS_OPS: OpDef[] = [];
