import { float32ToHalfBits, halfBitsToFloat, roundToHalf, HALF_MAX } from './dtype.js';

describe('float16 rounding', () => {
  it('rounds to nearest even', () => {
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1)
    expect(roundToHalf(1 + 2 ** -11)).toBe(1);
    // 1 + 3·2^-11 is halfway between 1+2^-10 and 1+2^-9: ties to even (1+2^-9)
    expect(roundToHalf(1 + 3 * 2 ** -11)).toBe(1 + 2 ** -9);
    expect(roundToHalf(0.1)).toBe(0.0999755859375);
  });
  it('handles overflow, subnormals, signed zero and NaN', () => {
    expect(roundToHalf(HALF_MAX)).toBe(HALF_MAX);
    expect(roundToHalf(65520)).toBe(Infinity); // halfway to the next binade rounds up to inf
    expect(roundToHalf(65519)).toBe(HALF_MAX);
    expect(roundToHalf(2 ** -24)).toBe(2 ** -24);
    expect(roundToHalf(2 ** -26)).toBe(0);
    expect(roundToHalf(3 * 2 ** -26)).toBe(2 ** -24);
    expect(Object.is(roundToHalf(-1e-10), -0)).toBe(true);
    expect(Number.isNaN(roundToHalf(NaN))).toBe(true);
  });
  it('round-trips every half bit pattern', () => {
    for (let h = 0; h < 0x10000; h++) {
      const f = halfBitsToFloat(h);
      if (Number.isNaN(f)) continue;
      expect(float32ToHalfBits(f)).toBe(h);
    }
  });
});
