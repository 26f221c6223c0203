import {
  AllSegmentsExhaustedError,
  LockNotAcquiredError,
  SegmentExhaustedError,
} from '../../lib/errors';
import { SegmentedStrategy, type SegmentCall } from '../../lib/api/segmented.strategy';

/** An in-memory stand-in for the lock engine: which slices are busy, and a log of every try. */
function fakeCall(opts: {
  segments: number;
  busy?: Set<number>;
  exhausted?: Set<number>;
  waitTimeout?: number;
  /** Called when a caller waits on a slice; may free it. */
  onWait?: (segment: number) => boolean;
}) {
  const log: { segment: number; waitMs: number; held: number }[] = [];
  let holding = 0;
  let maxHolding = 0;
  const call: SegmentCall<number> = {
    id: 'default\0stock:a',
    base: 'stock:a',
    segments: opts.segments,
    waitTimeout: opts.waitTimeout ?? 1_000,
    queued: () => 0,
    async tryRun(segment, waitMs) {
      log.push({ segment, waitMs, held: holding });
      const free = !opts.busy?.has(segment) || (waitMs > 0 && (opts.onWait?.(segment) ?? false));
      if (!free) return { busy: true, pttl: 50 };
      holding++;
      maxHolding = Math.max(maxHolding, holding);
      try {
        await Promise.resolve();
        if (opts.exhausted?.has(segment)) throw new SegmentExhaustedError();
        return { busy: false, value: segment };
      } finally {
        holding--;
      }
    },
  };
  return { call, log, maxHolding: () => maxHolding };
}

describe('SegmentedStrategy', () => {
  it('sweeps from a random start and takes the first free slice', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0.35);
    const { call, log } = fakeCall({ segments: 10, busy: new Set([3, 4]) });
    await expect(strategy.run(call)).resolves.toBe(5);
    expect(log.map((l) => l.segment)).toEqual([3, 4, 5]);
    expect(log.every((l) => l.waitMs === 0)).toBe(true);
  });

  it('visits every slice without waiting before it waits on one', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0.7);
    const busy = new Set(Array.from({ length: 8 }, (_, i) => i));
    const { call, log } = fakeCall({ segments: 8, busy, onWait: () => true });
    await strategy.run(call);
    const firstWait = log.findIndex((l) => l.waitMs > 0);
    expect(firstWait).toBe(8);
    expect(new Set(log.slice(0, firstWait).map((l) => l.segment)).size).toBe(8);
  });

  it('never holds two slices at once for one call', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0);
    const { call, log, maxHolding } = fakeCall({
      segments: 6,
      exhausted: new Set([0, 1, 2, 3, 4]),
    });
    await expect(strategy.run(call)).resolves.toBe(5);
    expect(maxHolding()).toBe(1);
    expect(log.every((l) => l.held === 0)).toBe(true);
  });

  it('moves on from an exhausted slice and remembers it', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0);
    const first = fakeCall({ segments: 3, exhausted: new Set([0]) });
    await expect(strategy.run(first.call)).resolves.toBe(1);
    const second = fakeCall({ segments: 3, exhausted: new Set([0]) });
    await expect(strategy.run(second.call)).resolves.toBe(1);
    // Slice 0 was remembered as exhausted: the second call did not try it.
    expect(second.log.map((l) => l.segment)).toEqual([1]);
  });

  it('rejects with AllSegmentsExhaustedError when no slice can serve', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0);
    const { call } = fakeCall({ segments: 4, exhausted: new Set([0, 1, 2, 3]) });
    const err = await strategy.run(call).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AllSegmentsExhaustedError);
    expect((err as AllSegmentsExhaustedError).segments).toBe(4);
    expect((err as Error).cause).toBeInstanceOf(SegmentExhaustedError);
  });

  it('retries exhausted slices after the memory expires, or at once after reset', async () => {
    const strategy = new SegmentedStrategy(30, () => 0);
    const exhausted = new Set([0, 1]);
    await expect(strategy.run(fakeCall({ segments: 2, exhausted }).call)).rejects.toBeInstanceOf(
      AllSegmentsExhaustedError,
    );
    exhausted.clear(); // restocked
    const remembered = fakeCall({ segments: 2, exhausted });
    await expect(strategy.run(remembered.call)).rejects.toBeInstanceOf(AllSegmentsExhaustedError);
    expect(remembered.log).toHaveLength(0);
    strategy.reset('default\0stock:a');
    await expect(strategy.run(fakeCall({ segments: 2, exhausted }).call)).resolves.toBe(0);

    await expect(
      strategy.run(fakeCall({ segments: 2, exhausted: new Set([0, 1]) }).call),
    ).rejects.toBeInstanceOf(AllSegmentsExhaustedError);
    await new Promise((r) => setTimeout(r, 40));
    await expect(strategy.run(fakeCall({ segments: 2 }).call)).resolves.toBe(0);
  });

  it('gives up with LockNotAcquiredError when every slice stays busy past waitTimeout', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0);
    const { call } = fakeCall({ segments: 3, busy: new Set([0, 1, 2]), waitTimeout: 20 });
    await expect(strategy.run(call)).rejects.toBeInstanceOf(LockNotAcquiredError);
  });

  it('waits in the shortest local line', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0);
    const { call, log } = fakeCall({ segments: 3, busy: new Set([0, 1, 2]), onWait: () => true });
    const queued = [4, 1, 3];
    await expect(strategy.run({ ...call, queued: (s) => queued[s] })).resolves.toBe(1);
    expect(log.at(-1)).toMatchObject({ segment: 1 });
    expect(log.at(-1)!.waitMs).toBeGreaterThan(0);
  });

  it('prefers the line of a slice held in this process (handed over with no round trip)', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0);
    const { call, log } = fakeCall({ segments: 3, busy: new Set([0, 1, 2]), onWait: () => true });
    const queued = [0, 3, 1];
    const held = [false, true, false];
    const run = strategy.run({ ...call, queued: (s) => queued[s], heldHere: (s) => held[s] });
    await expect(run).resolves.toBe(1);
    expect(log.at(-1)).toMatchObject({ segment: 1 });
    // ...but not at any price: a much longer local line loses to an empty remote one.
    queued[1] = 6;
    await strategy.run({ ...call, queued: (s) => queued[s], heldHere: (s) => held[s] });
    expect(log.at(-1)).toMatchObject({ segment: 0 });
  });

  it('skips the sweep for a moment after one found every slice busy, if a short local line is open', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0);
    const { call, log } = fakeCall({ segments: 3, busy: new Set([0, 1, 2]), onWait: () => true });
    let sweeps = 0;
    const queued = [0, 1, 0];
    const held = [false, true, false];
    const next = () =>
      strategy.run({
        ...call,
        queued: (s) => queued[s],
        heldHere: (s) => held[s],
        tryAny: async () => {
          sweeps++;
          return { busy: true, pttl: 50 };
        },
      });
    // The first call sweeps, finds every slice busy and waits in the held slice's line.
    await expect(next()).resolves.toBe(1);
    expect(sweeps).toBe(1);
    // The next one, moments later, joins that line without a round trip for a sweep.
    await expect(next()).resolves.toBe(1);
    expect(sweeps).toBe(1);
    expect(log.at(-1)).toMatchObject({ segment: 1 });
    // A long local line is no reason to skip it...
    queued[1] = 4;
    await next();
    expect(sweeps).toBe(2);
    // ...nor is a busy sweep that is no longer recent.
    queued[1] = 1;
    await new Promise((r) => setTimeout(r, 30));
    await next();
    expect(sweeps).toBe(3);
  });

  it('sweeps in one call when the engine can (tryAny), skipping exhausted slices', async () => {
    const strategy = new SegmentedStrategy(1_000, () => 0.5);
    const orders: number[][] = [];
    const exhausted = new Set([5, 6]);
    const { call } = fakeCall({ segments: 8 });
    const result = await strategy.run({
      ...call,
      tryAny: async (order) => {
        orders.push([...order]);
        const segment = order[0];
        if (exhausted.has(segment)) {
          return { busy: false, exhausted: new SegmentExhaustedError(), segment };
        }
        return { busy: false, value: segment };
      },
    });
    // Random start 4: the sweep offers every slice in order, from the start.
    expect(result).toBe(4);
    expect(orders[0]).toEqual([4, 5, 6, 7, 0, 1, 2, 3]);

    const second = new SegmentedStrategy(1_000, () => 5 / 8);
    const seen: number[][] = [];
    await expect(
      second.run({
        ...call,
        tryAny: async (order) => {
          seen.push([...order]);
          const segment = order[0];
          return exhausted.has(segment)
            ? { busy: false, exhausted: new SegmentExhaustedError(), segment }
            : { busy: false, value: segment };
        },
      }),
    ).resolves.toBe(7);
    // Each exhausted slice is left out of the next sweep.
    expect(seen).toEqual([
      [5, 6, 7, 0, 1, 2, 3, 4],
      [6, 7, 0, 1, 2, 3, 4],
      [7, 0, 1, 2, 3, 4],
    ]);
  });
});
