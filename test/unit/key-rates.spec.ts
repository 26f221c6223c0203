import { KeyRates, STEP_MS } from '../../lib/board/key-rates';
import { addSparse, quantile, waitBucket } from '../../lib/board/wait-histogram';

describe('wait histogram', () => {
  it('puts waits in ~26% buckets and reads percentiles as bucket edges', () => {
    expect(waitBucket(0)).toBe(0);
    expect(waitBucket(0.5)).toBe(0);
    expect(waitBucket(1)).toBe(1);
    expect(waitBucket(8)).toBe(10);
    expect(waitBucket(1e12)).toBe(63);
    const counts: number[] = [];
    addSparse(counts, [[0, 98]]);
    addSparse(counts, [[waitBucket(1_000), 2]]);
    expect(quantile(counts, 0.5)).toBe(1);
    expect(quantile(counts, 0.99)).toBeGreaterThanOrEqual(1_000);
    expect(quantile(counts, 0.99)).toBeLessThan(1_300);
    expect(quantile([], 0.5)).toBeNull();
  });
});

describe('KeyRates', () => {
  it('counts acquires, busy answers and waits per step, and publishes the busiest keys', () => {
    let now = 10 * STEP_MS + 100;
    const rates = new KeyRates(() => now);
    for (let i = 0; i < 10; i++) rates.record('g', ['hot'], 0, false);
    rates.record('g', ['hot'], 500, false);
    rates.record('g', ['hot'], 2_000, true);
    rates.record('g', ['cold'], 0, false);
    now += STEP_MS;
    rates.record('g', ['hot'], 0, false);
    const snap = rates.snapshot('g');
    expect(snap.total.map((s) => [s.t, s.acquires, s.busy])).toEqual([
      [10 * STEP_MS, 12, 1],
      [11 * STEP_MS, 1, 0],
    ]);
    expect(Object.keys(snap.keys)).toEqual(['hot', 'cold']);
    const first = snap.keys.hot[0];
    expect(first.waits).toEqual([
      [0, 10],
      [waitBucket(500), 1],
      [waitBucket(2_000), 1],
    ]);
    // Old steps leave the window.
    now += 100 * STEP_MS;
    expect(rates.snapshot('g').total).toEqual([]);
  });
});
