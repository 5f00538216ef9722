import { OpDef } from '../opdef.js';

export const ANNOTATION_OPS: OpDef[] = [];
