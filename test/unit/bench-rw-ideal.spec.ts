import { readHeavyCeiling } from '../../bench/rw-ideal';

describe("bench: the read-heavy scenario's ceiling under the lock's rules", () => {
  it('all readers run together; all writers one at a time', () => {
    expect(readHeavyCeiling(1, 50, 20, 0)).toBe(50);
    expect(readHeavyCeiling(4, 12, 20, 1)).toBe(1);
  });

  it('with 5% writes, lies between, and stays the same for the same draws', () => {
    const c = readHeavyCeiling(1, 50, 200, 0.05);
    expect(c).toBeGreaterThan(2);
    expect(c).toBeLessThan(50);
    expect(readHeavyCeiling(1, 50, 200, 0.05)).toBe(c);
  });
});
