import { WakeLatch } from '../../lib/redis/wake-latch';

describe('WakeLatch', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** What a sleep resolved to so far (undefined while it sleeps). */
  function observe(p: Promise<'woken' | 'timer'>) {
    let result: 'woken' | 'timer' | undefined;
    void p.then((r) => (result = r));
    return () => result;
  }

  it('a sleep nobody nudges ends with its timer, after `ms`', async () => {
    const latch = new WakeLatch();
    const result = observe(latch.sleep(100));
    await jest.advanceTimersByTimeAsync(99);
    expect(result()).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(result()).toBe('timer');
  });

  it('sleeps at least 1 ms, in whole ms rounded up', async () => {
    const latch = new WakeLatch();
    const zero = observe(latch.sleep(0));
    await jest.advanceTimersByTimeAsync(0);
    expect(zero()).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(zero()).toBe('timer');

    const negative = observe(latch.sleep(-50));
    await jest.advanceTimersByTimeAsync(1);
    expect(negative()).toBe('timer');

    const fractional = observe(latch.sleep(2.1));
    await jest.advanceTimersByTimeAsync(2);
    expect(fractional()).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(fractional()).toBe('timer');
  });

  it('a wake during a sleep ends it at once with "woken" and clears its timer', async () => {
    const latch = new WakeLatch();
    const result = observe(latch.sleep(10_000));
    await jest.advanceTimersByTimeAsync(5);
    expect(jest.getTimerCount()).toBe(1);
    latch.wake();
    await Promise.resolve();
    expect(result()).toBe('woken');
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a wake while awake is remembered: the next sleep returns "woken" at once', async () => {
    const latch = new WakeLatch();
    latch.wake();
    await expect(latch.sleep(10_000)).resolves.toBe('woken');
    expect(jest.getTimerCount()).toBe(0);
    // Used up: the sleep after that sleeps.
    const next = observe(latch.sleep(50));
    await jest.advanceTimersByTimeAsync(49);
    expect(next()).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(next()).toBe('timer');
  });

  it('several wakes while awake count as one', async () => {
    const latch = new WakeLatch();
    latch.wake();
    latch.wake();
    await expect(latch.sleep(10)).resolves.toBe('woken');
    const next = observe(latch.sleep(10));
    await jest.advanceTimersByTimeAsync(10);
    expect(next()).toBe('timer');
  });

  it('clear() forgets a remembered wake', async () => {
    const latch = new WakeLatch();
    latch.wake();
    latch.clear();
    const result = observe(latch.sleep(20));
    await jest.advanceTimersByTimeAsync(19);
    expect(result()).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(result()).toBe('timer');
  });

  it('a wake after a sleep ended by its timer is remembered for the next sleep', async () => {
    const latch = new WakeLatch();
    const first = observe(latch.sleep(5));
    await jest.advanceTimersByTimeAsync(5);
    expect(first()).toBe('timer');
    latch.wake();
    await expect(latch.sleep(1_000)).resolves.toBe('woken');
  });

  it("an old sleep's timer does not clobber a newer sleep's nudge", async () => {
    const latch = new WakeLatch();
    // An old sleep nobody waits for any more (its waiter moved on after a wake it missed).
    const old = observe(latch.sleep(10));
    // A newer sleep registers its nudge over the old one's.
    const newer = observe(latch.sleep(1_000));
    // The old sleep's timer ends it, and must leave the newer sleep's nudge in place.
    await jest.advanceTimersByTimeAsync(10);
    expect(old()).toBe('timer');
    expect(newer()).toBeUndefined();
    latch.wake();
    await Promise.resolve();
    expect(newer()).toBe('woken');
  });

  it('a wake ends only the latest sleep, and is not also remembered', async () => {
    const latch = new WakeLatch();
    const first = observe(latch.sleep(100));
    latch.wake();
    await Promise.resolve();
    expect(first()).toBe('woken');
    // The nudge was used by the sleep: the next sleep sleeps.
    const second = observe(latch.sleep(100));
    await jest.advanceTimersByTimeAsync(99);
    expect(second()).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(second()).toBe('timer');
  });

  describe('wait: a sleep with no timer', () => {
    it('ends only with a wake, and arms no timer', async () => {
      const latch = new WakeLatch();
      let woken = false;
      void latch.wait().then(() => (woken = true));
      expect(jest.getTimerCount()).toBe(0);
      await jest.advanceTimersByTimeAsync(60_000);
      expect(woken).toBe(false);
      latch.wake();
      await Promise.resolve();
      expect(woken).toBe(true);
    });

    it('a wake while awake is remembered: the next wait returns at once', async () => {
      const latch = new WakeLatch();
      latch.wake();
      let woken = false;
      void latch.wait().then(() => (woken = true));
      await Promise.resolve();
      expect(woken).toBe(true);
      // Used up: the next sleep sleeps.
      const next = observe(latch.sleep(100));
      await jest.advanceTimersByTimeAsync(99);
      expect(next()).toBeUndefined();
    });
  });
});
