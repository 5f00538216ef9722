import { DiagnosticError } from '../diagnostics.js';
import { GraphBuilder } from '../builder.js';
import { MAX_DIMENSION, MAX_ELEMENTS, shapeLimitProblem } from '../shape.js';
import { MAX_TEXT_NESTING, parseGraph } from './parser.js';
import { printGraph } from './printer.js';

/**
 * Limits of the text IR parser: values nested past MAX_TEXT_NESTING on a line, dimensions and
 * element counts past the IR's shape limits, and dense tensors whose size the line cannot back.
 * Each is a DiagnosticError at the offending token; nothing overflows or allocates first.
 */

function diagnostics(text: string): string[] {
  try {
    parseGraph(text, 'g.tgir');
  } catch (e) {
    expect(e).toBeInstanceOf(DiagnosticError);
    return (e as DiagnosticError).diagnostics.map((d) => `${d.loc?.frames[0]?.line}:${d.loc?.frames[0]?.col}: ${d.message}`);
  }
  return [];
}

const graph = (...lines: string[]) => `graph @g {\n${lines.map((l) => `  ${l}\n`).join('')}}\n`;
const constant = (attr: string) => graph(`%a = constant {value = dense<f32[], [1.0]>, x = ${attr}} : f32[]`, 'output "y" = %a');

describe('text IR limits', () => {
  test('the shape limits', () => {
    expect(MAX_DIMENSION).toBe(2 ** 31 - 1);
    expect(MAX_ELEMENTS).toBe(2 ** 31 - 1);
    expect(shapeLimitProblem([2 ** 31 - 1])).toBeUndefined();
    expect(shapeLimitProblem([2 ** 53])).toBe('a dimension must be an integer from 0 to 2147483647 (2^31-1), got 9007199254740992');
    expect(shapeLimitProblem([-1])).toBe('a dimension must be an integer from 0 to 2147483647 (2^31-1), got -1');
    expect(shapeLimitProblem([65536, 65536])).toBe('a tensor holds at most 2147483647 (2^31-1) elements; shape [65536,65536] has 4294967296');
  });

  test('lists nested past the limit: one diagnostic at the opening bracket', () => {
    expect(diagnostics(constant(`${'['.repeat(MAX_TEXT_NESTING - 1)}1${']'.repeat(MAX_TEXT_NESTING - 1)}`))).not.toContainEqual(expect.stringContaining('nest'));
    const deep = diagnostics(constant(`${'['.repeat(10_000)}1${']'.repeat(10_000)}`));
    expect(deep).toEqual([`2:${51 + MAX_TEXT_NESTING}: values nest more than ${MAX_TEXT_NESTING} levels deep on this line`]);
  });

  test('name<key = ...> nested past the limit', () => {
    const deep = diagnostics(graph(`%a = constant {value = ${'a<b = '.repeat(5000)}1${'>'.repeat(5000)}} : f32[]`, 'output "y" = %a'));
    expect(deep).toHaveLength(1);
    expect(deep[0]).toMatch(new RegExp(`^2:\\d+: values nest more than ${MAX_TEXT_NESTING} levels deep on this line$`));
  });

  test('dimensions and element counts: the same message as the model language and the ONNX importer', () => {
    const input = (type: string) => diagnostics(graph(`%x = input {name = "x"} : ${type}`, 'output "y" = %x'));
    expect(input('f32[9007199254740992]')).toEqual(['2:33: a dimension must be an integer from 0 to 2147483647 (2^31-1), got 9007199254740992']);
    expect(input('f32[2147483648]')).toEqual(['2:33: a dimension must be an integer from 0 to 2147483647 (2^31-1), got 2147483648']);
    expect(input('f32[65536,65536]')).toEqual(['2:29: a tensor holds at most 2147483647 (2^31-1) elements; shape [65536,65536] has 4294967296']);
    expect(input('f32[2147483647]')).toEqual([]);
    // an inferred type past the limit is reported at the op
    expect(diagnostics(graph('%x = input {name = "x"} : f32[2]', '%y = expand(%x) {shape = [65536, 65536, 2]}', 'output "y" = %y'))).toEqual([
      '3:8: expand: a tensor holds at most 2147483647 (2^31-1) elements; shape [65536,65536,2] has 8589934592',
    ]);
  });

  test('a dense tensor is counted before memory is taken for it', () => {
    expect(diagnostics(graph('%a = constant {value = dense<f32[2000000000], [1.0]>} : f32[2000000000]', 'output "y" = %a'))).toEqual([
      '2:49: 1 value given for 2000000000 elements',
    ]);
    expect(diagnostics(graph('%a = constant {value = dense<f32[2000000000], "0x00">} : f32[2000000000]', 'output "y" = %a'))).toEqual([
      '2:49: expected "0x" and 8000000000 hex bytes for 2000000000 elements',
    ]);
  });

  test('a graph at the dimension limit prints text that parses back', () => {
    const b = new GraphBuilder('g');
    b.output('y', b.input('x', 'float32', [MAX_DIMENSION]));
    const text = printGraph(b.graph);
    expect(parseGraph(text, 'g.tgir').inputs()[0]!.result.type.shape).toEqual([MAX_DIMENSION]);
  });
});
