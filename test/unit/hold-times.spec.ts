import { LockNotAcquiredError } from '../../lib';
import { HoldTimes, withRetryEstimate } from '../../lib/api/hold-times';

const busy = (keys: string[], leaseLeftMs: number) =>
  new LockNotAcquiredError(keys, 100, leaseLeftMs);

describe('HoldTimes', () => {
  it('starts a key at its first hold and moves its average towards the later ones', () => {
    const times = new HoldTimes();
    expect(times.estimate('k')).toBeUndefined();
    times.record('k', 300);
    expect(times.estimate('k')).toBe(300);
    for (let i = 0; i < 20; i++) times.record('k', 1_000);
    expect(times.estimate('k')).toBeGreaterThan(990);
    // One long hold moves the average, without taking it over.
    times.record('k', 30_000);
    expect(times.estimate('k')).toBeGreaterThan(1_000);
    expect(times.estimate('k')).toBeLessThan(30_000);
  });

  it('keeps at most `limit` keys, forgetting the least recently released first', () => {
    const times = new HoldTimes(3);
    times.record('a', 1);
    times.record('b', 2);
    times.record('c', 3);
    times.record('a', 1); // released again: now the most recent
    times.record('d', 4);
    expect(times.size).toBe(3);
    expect(times.estimate('b')).toBeUndefined();
    expect(['a', 'c', 'd'].map((k) => times.estimate(k))).toEqual([1, 3, 4]);
  });
});

describe('withRetryEstimate', () => {
  const times = new HoldTimes();
  times.record('p:1', 300);
  times.record('p:2', 800);
  times.record('stock:a:seg:0', 900);
  times.record('stock:a:seg:3', 400);

  it("replaces the holder's lease by the key's usual hold", () => {
    const error = withRetryEstimate(busy(['p:1'], 29_500), times);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect(error.retryAfterMs).toBe(300);
    expect(error.keys).toEqual(['p:1']);
    expect(error.waitedMs).toBe(100);
  });

  it('never says later than the lease left', () => {
    const error = busy(['p:2'], 120);
    expect(withRetryEstimate(error, times)).toBe(error);
  });

  it('uses the usual hold when the lease tells nothing (no expiry, or none seen)', () => {
    expect(withRetryEstimate(busy(['p:1'], -1), times).retryAfterMs).toBe(300);
    expect(withRetryEstimate(busy(['p:1'], 0), times).retryAfterMs).toBe(300);
  });

  it('several keys: the longest usual hold, all keys must free up', () => {
    expect(withRetryEstimate(busy(['p:1', 'p:2'], 29_000), times).retryAfterMs).toBe(800);
  });

  it('a key not released here lately: the lease left, at most 1 s', () => {
    // The watchdog keeps a holder's lease near ttl: 29 s says nothing of a 400 ms hold.
    for (const t of [times, undefined]) {
      expect(withRetryEstimate(busy(['p:1', 'p:9'], 29_000), t).retryAfterMs).toBe(1_000);
      expect(withRetryEstimate(busy(['p:9'], -1), t).retryAfterMs).toBe(1_000);
      const soon = busy(['p:9'], 250);
      expect(withRetryEstimate(soon, t)).toBe(soon);
    }
  });

  it('segmented: the shortest usual hold among its slices, any one will do', () => {
    expect(withRetryEstimate(busy(['stock:a'], 29_000), times, 4).retryAfterMs).toBe(400);
    expect(withRetryEstimate(busy(['stock:b'], 29_000), times, 4).retryAfterMs).toBe(1_000);
  });
});
