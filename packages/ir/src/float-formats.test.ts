import { LOW_FLOAT_DTYPES, LowFloatDType, lowFloatFromBits, lowFloatToBits, roundToLowFloat } from './float-formats.js';

// Expected values are worked out by hand from each format's layout (sign, exponent bits, bias,
// mantissa bits) and the ONNX Cast rules for overflow, NaN and zero.

describe('float8 e4m3fn (bias 7, 3 mantissa bits, max 448, no Inf)', () => {
  const r = (x: number, saturate?: boolean) => roundToLowFloat('float8e4m3fn', x, saturate === undefined ? {} : { saturate });
  it('rounds to nearest even', () => {
    // 0.3 = 1.2·2^-2: steps of 2^-5 there, 0.3/2^-5 = 9.6 → 10 → 0.3125
    expect(r(0.3)).toBe(0.3125);
    expect(r(448)).toBe(448);
    // 464 lies halfway between 448 (mantissa 110) and 480 (111): ties go to the even mantissa
    expect(r(464, false)).toBe(448);
    // subnormals: steps of 2^-9; 3·2^-10 is halfway between 2^-9 and 2^-8 → 2^-8 (even)
    expect(r(3 * 2 ** -10)).toBe(2 ** -8);
    expect(r(2 ** -11)).toBe(0);
    expect(Object.is(r(-(2 ** -11)), -0)).toBe(true);
  });
  it('saturates beyond 448 unless saturate is off, when it gives NaN', () => {
    expect(r(500)).toBe(448);
    expect(r(-500)).toBe(-448);
    expect(r(Infinity)).toBe(448);
    expect(r(500, false)).toBeNaN();
    expect(r(-Infinity, false)).toBeNaN();
    expect(r(NaN)).toBeNaN();
  });
  it('encodes 448 as 0x7e and NaN as 0x7f', () => {
    expect(lowFloatToBits('float8e4m3fn', 448)).toBe(0x7e);
    expect(lowFloatToBits('float8e4m3fn', -448)).toBe(0xfe);
    expect(lowFloatToBits('float8e4m3fn', NaN)).toBe(0x7f);
    expect(lowFloatToBits('float8e4m3fn', 1)).toBe(0x38); // exponent 7 = bias, mantissa 0
    expect(lowFloatFromBits('float8e4m3fn', 0x01)).toBe(2 ** -9);
    expect(lowFloatFromBits('float8e4m3fn', 0xff)).toBeNaN();
  });
});

describe('the other float8 formats', () => {
  it('e4m3fnuz: max 240, no negative zero, NaN is 0x80', () => {
    expect(roundToLowFloat('float8e4m3fnuz', 1000)).toBe(240);
    expect(roundToLowFloat('float8e4m3fnuz', 1000, { saturate: false })).toBeNaN();
    expect(Object.is(roundToLowFloat('float8e4m3fnuz', -0), 0)).toBe(true);
    expect(Object.is(roundToLowFloat('float8e4m3fnuz', -(2 ** -20)), 0)).toBe(true);
    expect(lowFloatToBits('float8e4m3fnuz', NaN)).toBe(0x80);
    expect(lowFloatFromBits('float8e4m3fnuz', 0x80)).toBeNaN();
    expect(lowFloatToBits('float8e4m3fnuz', 1)).toBe(0x40); // bias 8
  });
  it('e5m2: IEEE-like with infinities, max 57344', () => {
    expect(roundToLowFloat('float8e5m2', 1e6)).toBe(57344);
    expect(roundToLowFloat('float8e5m2', 1e6, { saturate: false })).toBe(Infinity);
    expect(roundToLowFloat('float8e5m2', -Infinity, { saturate: false })).toBe(-Infinity);
    // 61440 is halfway between 57344 (mantissa 11) and 2^16 (the Inf encoding): to even → Inf
    expect(roundToLowFloat('float8e5m2', 61440, { saturate: false })).toBe(Infinity);
    expect(roundToLowFloat('float8e5m2', 61439, { saturate: false })).toBe(57344);
    expect(lowFloatToBits('float8e5m2', Infinity)).toBe(0x7c);
    expect(lowFloatFromBits('float8e5m2', 0xfc)).toBe(-Infinity);
    expect(roundToLowFloat('float8e5m2', 0.3)).toBe(0.3125); // steps of 2^-4 above 0.25
  });
  it('e5m2fnuz: max 57344, NaN instead of Inf', () => {
    expect(roundToLowFloat('float8e5m2fnuz', Infinity)).toBe(57344);
    expect(roundToLowFloat('float8e5m2fnuz', Infinity, { saturate: false })).toBeNaN();
    expect(lowFloatToBits('float8e5m2fnuz', 1)).toBe(0x40); // bias 16
  });
  it('e8m0: powers of two 2^-127 … 2^127, rounded up by default', () => {
    expect(roundToLowFloat('float8e8m0', 3)).toBe(4);
    expect(roundToLowFloat('float8e8m0', 3, { e8m0Rounding: 'down' })).toBe(2);
    expect(roundToLowFloat('float8e8m0', 3, { e8m0Rounding: 'nearest' })).toBe(4); // 1.5·2: ties up
    expect(roundToLowFloat('float8e8m0', 2.9, { e8m0Rounding: 'nearest' })).toBe(2);
    expect(roundToLowFloat('float8e8m0', 4)).toBe(4);
    expect(lowFloatToBits('float8e8m0', 1)).toBe(127);
    expect(lowFloatFromBits('float8e8m0', 0)).toBe(2 ** -127);
    expect(lowFloatFromBits('float8e8m0', 0xff)).toBeNaN();
  });
});

describe('bfloat16 and float4 e2m1', () => {
  it('bfloat16 keeps float32 range with 7 mantissa bits, ties to even', () => {
    expect(roundToLowFloat('bfloat16', 1 + 2 ** -8)).toBe(1); // halfway, 1 is even
    expect(roundToLowFloat('bfloat16', 1 + 3 * 2 ** -8)).toBe(1 + 2 ** -6); // halfway, up to even
    expect(roundToLowFloat('bfloat16', 0.1)).toBe(0.10009765625);
    expect(roundToLowFloat('bfloat16', 1e39)).toBe(Infinity); // beyond float32
    expect(lowFloatToBits('bfloat16', 1)).toBe(0x3f80);
    expect(lowFloatToBits('bfloat16', -2)).toBe(0xc000);
  });
  it('float4 e2m1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6 and saturates', () => {
    const r = (x: number) => roundToLowFloat('float4e2m1', x);
    expect([0.25, 0.75, 1.25, 2.5, 5, 7, Infinity, -100].map(r)).toEqual([0, 1, 1, 2, 4, 6, 6, -6]);
    expect(r(NaN)).toBe(0);
    expect(lowFloatToBits('float4e2m1', 6)).toBe(0x7);
    expect(lowFloatToBits('float4e2m1', -0.5)).toBe(0x9);
  });
});

describe('bit encodings', () => {
  it('every 8-bit and 4-bit code decodes to a value that encodes back to it', () => {
    for (const t of LOW_FLOAT_DTYPES.filter((d): d is LowFloatDType => d !== 'bfloat16')) {
      const codes = t === 'float4e2m1' ? 16 : 256;
      for (let c = 0; c < codes; c++) {
        const v = lowFloatFromBits(t, c);
        if (Number.isNaN(v)) continue;
        expect(`${t} ${c}: ${lowFloatToBits(t, v)}`).toBe(`${t} ${c}: ${c}`);
        expect(roundToLowFloat(t, v, { saturate: false })).toBe(v);
      }
    }
  });
});
