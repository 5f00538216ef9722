import { OpDef } from '../opdef.js';

export const MOVEMENT_OPS: OpDef[] = [];
