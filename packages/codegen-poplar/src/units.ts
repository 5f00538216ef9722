import { GRAPH_FILE, HOST_INCLUDES, OUTLINED_FILE } from './host.js';

/**
 * The host program's translation units besides host.cpp, so that a large program compiles on
 * several cores and each part is cached by its content: host_layers.cpp (the outlined layers'
 * bodies) and host_graph.cpp (the builder of the largest graph, when it is large). Each holds
 * the module's constants and the file-scope constant data its code reads, file-local, and its
 * functions in a namespace of their own that host.cpp declares.
 */

/** A graph's builder this large or larger compiles in a unit of its own (a training step's forward and backward graph, say). */
export const GRAPH_UNIT_BYTES = 32 * 1024;

/** A translation unit besides host.cpp: its text, and the declarations host.cpp needs. */
export interface HostUnit {
  readonly text: string;
  readonly prototypes: string;
}

/** The file-scope constant data `code` reads (each unit gets only its own). */
function dataReadBy(fileScope: readonly string[], code: string): string[] {
  return fileScope.filter((x) => {
    const name = /^const [^=[]*?(\w+)\[/.exec(x)?.[1];
    return name === undefined || new RegExp(`\\b${name}\\b`).test(code);
  });
}

function unitText(header: string, what: string, preamble: readonly string[], constants: readonly string[], fileScope: readonly string[], ns: string, uses: readonly string[], code: string): string {
  return [
    header.replace(/: do not edit\.$/, `, ${what} (declared in host.cpp): do not edit.`),
    HOST_INCLUDES,
    '',
    ...preamble,
    'namespace {',
    'using namespace tilegraph;',
    ...constants,
    '',
    ...dataReadBy(fileScope, code).map((x) => `${x}\n`),
    '} // namespace',
    '',
    `namespace ${ns} {`,
    'using namespace tilegraph;',
    ...uses.map((u) => `using namespace ${u};`),
    '',
    code,
    `} // namespace ${ns}`,
    '',
  ].join('\n');
}

const declarations = (file: string, ns: string, signatures: readonly string[]) => [`// in ${file}`, `namespace ${ns} {`, 'using namespace tilegraph;', ...signatures.map((s) => `${s};`), `} // namespace ${ns}`].join('\n');

/** host_layers.cpp: the outlined bodies, in namespace tilegraph_layers. */
export function outlinedLayersUnit(header: string, constants: readonly string[], fileScope: readonly string[], bodies: readonly { readonly signature: string; readonly text: string }[]): HostUnit {
  const code = bodies.map((c) => `${c.text}\n`).join('\n');
  return {
    text: unitText(header, 'its outlined layers', [], constants, fileScope, 'tilegraph_layers', [], code),
    prototypes: declarations(OUTLINED_FILE, 'tilegraph_layers', bodies.map((b) => b.signature)),
  };
}

/**
 * host_graph.cpp: the builder of the largest graph (`code`, a function `signature`), in namespace
 * tilegraph_graphs; `layers` are the outlined layers' declarations it calls, if any.
 */
export function graphUnit(header: string, constants: readonly string[], fileScope: readonly string[], signature: string, code: string, layers: HostUnit | undefined): HostUnit {
  return {
    text: unitText(header, 'the builder of its largest graph', layers ? [layers.prototypes, ''] : [], constants, fileScope, 'tilegraph_graphs', layers ? ['tilegraph_layers'] : [], code),
    prototypes: declarations(GRAPH_FILE, 'tilegraph_graphs', [signature]),
  };
}
