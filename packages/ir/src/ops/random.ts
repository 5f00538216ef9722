import { OpDef } from '../opdef.js';

export const RANDOM_OPS: OpDef[] = [];
