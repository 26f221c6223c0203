import { performance } from 'node:perf_hooks';
import { DeadlineSweep } from '../../lib/zookeeper/deadline-sweep';

/** lib/zookeeper/deadline-sweep.ts: many deadlines on one timer. */

/** Resolves once `expired` has seen `count` items, or rejects after `ms`. */
function expirations<T>(count: number, ms: number) {
  const seen: { item: T; at: number }[] = [];
  let done!: () => void;
  const all = new Promise<void>((resolve, reject) => {
    done = resolve;
    setTimeout(() => reject(new Error(`only ${seen.length} of ${count} expired`)), ms).unref();
  });
  const expired = (item: T) => {
    seen.push({ item, at: performance.now() });
    if (seen.length === count) done();
  };
  return { seen, all, expired };
}

describe('DeadlineSweep', () => {
  it('hands each item over once its deadline has passed, in deadline order, never before', async () => {
    const { seen, all, expired } = expirations<string>(3, 5_000);
    const sweep = new DeadlineSweep<string>(expired);
    const now = performance.now();
    const deadlines: Record<string, number> = { late: now + 60, early: now + 10, middle: now + 30 };
    for (const [item, at] of Object.entries(deadlines)) sweep.set(item, at);
    await all;
    expect(seen.map((s) => s.item)).toEqual(['early', 'middle', 'late']);
    for (const s of seen) expect(s.at).toBeGreaterThanOrEqual(deadlines[s.item]);
    expect(sweep.delete('early')).toBe(false);
  });

  it('never hands over an item deleted before its deadline, and follows a moved deadline', async () => {
    const { seen, all, expired } = expirations<string>(2, 5_000);
    const sweep = new DeadlineSweep<string>(expired);
    const now = performance.now();
    sweep.set('answered', now + 5);
    sweep.set('renewed', now + 5);
    sweep.set('kept', now + 20);
    expect(sweep.delete('answered')).toBe(true);
    sweep.set('renewed', now + 40);
    await all;
    expect(seen.map((s) => s.item)).toEqual(['kept', 'renewed']);
    expect(seen[1].at).toBeGreaterThanOrEqual(now + 40);
  });

  it('hands over nothing after clear', async () => {
    const { seen, expired } = expirations<string>(1, 5_000);
    const sweep = new DeadlineSweep<string>(expired);
    sweep.set('gone', performance.now() + 5);
    sweep.clear();
    // A later item proves the timer ran past the cleared one's deadline.
    const later = expirations<string>(1, 5_000);
    const other = new DeadlineSweep<string>(later.expired);
    other.set('probe', performance.now() + 30);
    await later.all;
    expect(seen).toEqual([]);
  });
});
