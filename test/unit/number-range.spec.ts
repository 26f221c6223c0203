import { LockConfigError } from '../../lib/errors';
import { inRange, type NumberRange } from '../../lib/options/number-range';
import { RANGES, resolveRedlockOptions } from '../../lib/options/redlock-options';
import { EXPECTED_NUMBER } from '../../lib/options/option.messages';

/**
 * Each number option's range is written once (RANGES): its check and the "expected ..." of its
 * error are both read from it, so what a message says is what the check does.
 */
describe('number ranges', () => {
  it('inRange: bounds inclusive unless excluded, integers, safe integers, Infinity, NaN', () => {
    const r: NumberRange = { min: 1, max: 3 };
    expect([0.9, 1, 3, 3.1].map((v) => inRange(r, v))).toEqual([false, true, true, false]);
    const open: NumberRange = { min: 1, aboveMin: true, max: 3, belowMax: true };
    expect([1, 2, 3].map((v) => inRange(open, v))).toEqual([false, true, false]);
    expect([1.5, 2].map((v) => inRange({ integer: true, min: 0 }, v))).toEqual([false, true]);
    expect(inRange({ integer: 'safe', min: 0 }, 2 ** 53)).toBe(false);
    expect(inRange({ integer: true, min: 0 }, 2 ** 53)).toBe(true);
    expect(inRange({ min: 0, max: 1 }, Infinity)).toBe(false);
    expect(inRange({ min: 0, max: 1, orInfinity: true }, Infinity)).toBe(true);
    expect([NaN, '1', null, undefined].some((v) => inRange({ min: 0 }, v))).toBe(false);
  });

  it.each(Object.entries(RANGES))(
    '%s: the message names the bounds the check enforces',
    (_name, range: NumberRange) => {
      const text = EXPECTED_NUMBER(range);
      expect(text).toContain(String(range.min));
      expect(inRange(range, range.min)).toBe(!range.aboveMin);
      expect(inRange(range, range.min - 1)).toBe(false);
      if (range.max === undefined) {
        expect(inRange(range, 2 ** 40)).toBe(true);
        return;
      }
      expect(text).toContain(String(range.max));
      expect(inRange(range, range.max)).toBe(!range.belowMax);
      expect(inRange(range, range.max + 1)).toBe(false);
      // A bound that is refused is said to be: "> 0", "less than 0.5".
      if (range.aboveMin) expect(text).toContain(`> ${range.min}`);
      if (range.belowMax) expect(text).toContain(`less than ${range.max}`);
    },
  );

  it('driftFactor: 0.5 is refused, and the message says the range stops below it', () => {
    expect(resolveRedlockOptions({ driftFactor: 0.49 }).driftFactor).toBe(0.49);
    const error = (() => {
      try {
        resolveRedlockOptions({ driftFactor: 0.5 });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as Error).message).toContain('expected a number from 0 to less than 0.5');
  });

  it('ttl: the lowest ttl the check takes is the one the message names', () => {
    expect(resolveRedlockOptions({ ttl: RANGES.ttl.min }).ttl).toBe(RANGES.ttl.min);
    expect(() => resolveRedlockOptions({ ttl: RANGES.ttl.min - 1 })).toThrow(
      `expected an integer number of ms from ${RANGES.ttl.min} to`,
    );
  });
});
