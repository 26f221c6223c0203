import { Leases } from '../../lib/core/lease';
import { LockLostError } from '../../lib/errors';
import { type LeaseRenewer, Watchdog, type WatchedLease } from '../../lib/watchdog/watchdog';
import { type FakeTime, fakeTimersWithPerformance } from './support/clock';

/** The lease as the engine keeps it: a renewal moves its validUntil. */
interface TestLease extends WatchedLease {
  validUntil: number;
}

const leases = new Leases(0.01);
const TTL = 3_000;

describe('Watchdog', () => {
  let time: FakeTime;
  let dogs: Watchdog[];

  beforeEach(() => {
    time = fakeTimersWithPerformance();
    dogs = [];
  });

  afterEach(async () => {
    for (const dog of dogs) dog.stop();
    // The wake-up timers are shared by every watchdog of the process (module state): let each
    // fire once and find nobody, so the next test starts with none armed.
    for (let i = 0; i < 10 && jest.getTimerCount() > 0; i++) await jest.runAllTimersAsync();
    expect(jest.getTimerCount()).toBe(0);
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  /** A lease taken now for `ttl` ms, valid until now + ttl - drift (as Leases computes it). */
  const leaseFor = (ttl = TTL, keys = ['k']): TestLease => ({
    keys,
    validUntil: leases.validUntil(time.now(), ttl),
  });

  /** A renewer whose renewals succeed at once, moving the lease on as the engine does. */
  const renewing = (): LeaseRenewer & { extend: jest.Mock; at: number[] } => {
    const at: number[] = [];
    const extend = jest.fn(async (lease: WatchedLease, ttl: number) => {
      at.push(time.now());
      (lease as TestLease).validUntil = leases.validUntil(time.now(), ttl);
      return true;
    });
    return { extend, at };
  };

  /** Starts a watchdog (stopped after the test) recording its losses and when they came. */
  function watch(
    renewer: LeaseRenewer,
    lease: WatchedLease,
    opts: { ttl?: number; maxHold?: number; renews?: boolean } = {},
  ) {
    const lost: { error: LockLostError; at: number }[] = [];
    const dog = new Watchdog(
      { client: renewer, lease, onLost: (error) => lost.push({ error, at: time.now() }) },
      opts.ttl ?? TTL,
      opts.maxHold ?? Infinity,
      opts.renews ?? true,
    );
    dogs.push(dog);
    dog.start();
    return { dog, lost };
  }

  /** Advances the timers and the clock, running promise callbacks in between. */
  const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);

  it('watches its lease: the engine finding it lost between renewals is reported at once, once', async () => {
    const lease = leaseFor();
    const { dog, lost } = watch(renewing(), lease);
    expect(lease.watcher).toBe(dog);
    await advance(10);
    lease.watcher!.leaseEnded();
    lease.watcher?.leaseEnded();
    expect(lost.map((l) => [l.error.reason, l.at])).toEqual([['lost', time.now()]]);
    // Stopped: it no longer watches, and its timer never reports again.
    expect(lease.watcher).toBeUndefined();
    await advance(TTL * 2);
    expect(lost).toHaveLength(1);
  });

  it('stops watching its lease when stopped', () => {
    const lease = leaseFor();
    const { dog } = watch(renewing(), lease);
    dog.stop();
    expect(lease.watcher).toBeUndefined();
  });

  describe('renewals', () => {
    it('renews every ttl / 3 with the full ttl', async () => {
      const r = renewing();
      const lease = leaseFor();
      const { lost } = watch(r, lease);
      await advance(999);
      expect(r.extend).not.toHaveBeenCalled();
      await advance(1);
      expect(r.extend).toHaveBeenCalledTimes(1);
      expect(r.extend).toHaveBeenLastCalledWith(lease, TTL, true);
      await advance(9_000);
      expect(r.at).toEqual([1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 7_000, 8_000, 9_000, 10_000]);
      for (const call of r.extend.mock.calls) expect(call).toEqual([lease, TTL, true]);
      expect(lost).toEqual([]);
      // Renewed in time: the lease never ran out.
      expect(lease.validUntil).toBeGreaterThan(time.now());
    });

    it('never shortens a lease its holder extended past ttl (handle.extend): renews once it is down to the usual', async () => {
      const r = renewing();
      const lease = leaseFor();
      const shortened: number[] = [];
      r.extend.mockImplementation(async (l: WatchedLease, ttl: number) => {
        const before = (l as TestLease).validUntil;
        (l as TestLease).validUntil = leases.validUntil(time.now(), ttl);
        if ((l as TestLease).validUntil < before) shortened.push(time.now());
        r.at.push(time.now());
        return true;
      });
      const { lost } = watch(r, lease);
      await advance(500);
      // The holder extends to 30 s (what `extend(30_000)` on its handle does to the lease).
      lease.validUntil = leases.validUntil(time.now(), 30_000);
      await advance(40_000);
      expect(shortened).toEqual([]);
      expect(lost).toEqual([]);
      // The first renewal comes once the extension is down to what a renewal gives (2/3 ttl
      // left, as usual), and every ttl / 3 after it.
      expect(r.at[0]).toBeGreaterThan(500 + 30_000 - TTL);
      expect(r.at[0]).toBeLessThanOrEqual(500 + 30_000);
      expect(lease.validUntil).toBeGreaterThan(time.now());
    });

    it('1,000 due at once wake 256 per timer, 1 ms apart, and all renew', async () => {
      const r = renewing();
      const leases1k = Array.from({ length: 1_000 }, () => leaseFor());
      const lost = leases1k.map((lease) => watch(r, lease).lost);
      await advance(999);
      expect(r.extend).not.toHaveBeenCalled();
      await advance(1);
      expect(r.at).toHaveLength(256);
      await advance(3);
      expect(r.at).toHaveLength(1_000);
      expect(new Set(r.at)).toEqual(new Set([1_000, 1_001, 1_002, 1_003]));
      expect(lost.flat()).toEqual([]);
    });

    it('a ttl not divisible by 3: renews at most ttl / 3 (rounded up to the ms) apart', async () => {
      const r = renewing();
      const lease = leaseFor(1_000);
      watch(r, lease, { ttl: 1_000 });
      await advance(3_000);
      expect(r.at.length).toBeGreaterThanOrEqual(8);
      let last = 0;
      for (const t of r.at) {
        expect(t - last).toBeLessThanOrEqual(334);
        expect(t - last).toBeGreaterThanOrEqual(333);
        last = t;
      }
    });

    it('the next renewal is ttl / 3 after the previous one answered', async () => {
      const at: number[] = [];
      const lease = leaseFor();
      const extend = jest.fn((l: WatchedLease, ttl: number) => {
        const start = time.now();
        at.push(start);
        return new Promise<boolean>((resolve) =>
          setTimeout(() => {
            (l as TestLease).validUntil = leases.validUntil(start, ttl);
            resolve(true);
          }, 500),
        );
      });
      const { lost } = watch({ extend }, lease);
      await advance(7_000);
      expect(at).toEqual([1_000, 2_500, 4_000, 5_500, 7_000]);
      expect(lost).toEqual([]);
    });

    it('a lease that comes with less than ttl / 3 left (a slow acquire) is renewed before it ends', async () => {
      const r = renewing();
      // The acquire round started 2.5 s ago (a loaded machine): 468 ms of the lease are left.
      const lease: TestLease = { keys: ['k'], validUntil: leases.validUntil(-2_500, TTL) };
      const left = lease.validUntil - time.now();
      expect(left).toBeLessThan(TTL / 3);
      const { lost } = watch(r, lease);
      await advance(left - 1);
      expect(r.at).toHaveLength(1);
      expect(lost).toEqual([]);
      await advance(10_000);
      expect(lost).toEqual([]);
      expect(lease.validUntil).toBeGreaterThan(time.now());
    });

    it('a renewal answered late: the next one goes while there is time left for its answer', async () => {
      const at: number[] = [];
      // The second renewal (sent at 2,000, 1,968 ms before its lease ends) takes 1.9 s, the
      // third 400 ms, the others answer at once.
      const delays = [0, 1_900, 400];
      const extend = jest.fn(async (l: WatchedLease, ttl: number) => {
        const start = time.now();
        const delay = delays[at.length] ?? 0;
        at.push(start);
        if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
        (l as TestLease).validUntil = leases.validUntil(start, ttl);
        return true;
      });
      const lease = leaseFor();
      const { lost } = watch({ extend }, lease);
      await advance(8_000);
      // Answered at 3,900 with 1,068 ms left: the next goes at half of that, not ttl / 3 later
      // (4,900, when 68 ms would be left for a round trip of 400 ms).
      expect(at.slice(0, 3)).toEqual([1_000, 2_000, 3_900 + 534]);
      expect(lost).toEqual([]);
    });

    it('two watchdogs of the same ttl, started apart, each keep their own rhythm', async () => {
      const r1 = renewing();
      const r2 = renewing();
      watch(r1, leaseFor());
      await advance(400);
      const second = watch(r2, leaseFor());
      await advance(2_600);
      expect(r1.at).toEqual([1_000, 2_000, 3_000]);
      expect(r2.at).toEqual([1_400, 2_400]);
      second.dog.stop();
      await advance(2_000);
      expect(r1.at).toEqual([1_000, 2_000, 3_000, 4_000, 5_000]);
      expect(r2.at).toEqual([1_400, 2_400]);
    });
  });

  describe('stop()', () => {
    it('no renewal after stop(), and no loss reported', async () => {
      const r = renewing();
      const { dog, lost } = watch(r, leaseFor());
      await advance(2_000);
      expect(r.extend).toHaveBeenCalledTimes(2);
      dog.stop();
      await advance(20_000);
      expect(r.extend).toHaveBeenCalledTimes(2);
      expect(lost).toEqual([]);
    });

    it('stopped before the first renewal: never renews, never reports', async () => {
      const r = renewing();
      const { dog, lost } = watch(r, leaseFor());
      dog.stop();
      dog.stop();
      await advance(20_000);
      expect(r.extend).not.toHaveBeenCalled();
      expect(lost).toEqual([]);
    });

    it('stopped while a renewal is out: its answer, whatever it is, changes nothing', async () => {
      let answer!: (ok: boolean) => void;
      const extend = jest.fn(() => new Promise<boolean>((resolve) => (answer = resolve)));
      const lease = leaseFor();
      const { dog, lost } = watch({ extend }, lease);
      await advance(1_000);
      expect(extend).toHaveBeenCalledTimes(1);
      dog.stop();
      answer(false);
      await advance(20_000);
      expect(extend).toHaveBeenCalledTimes(1);
      expect(lost).toEqual([]);
    });
  });

  describe('losses', () => {
    it("a renewal answering false: 'lost' once, and no more renewals", async () => {
      const extend = jest.fn(async () => false);
      const lease = leaseFor(TTL, ['a', 'b']);
      const { lost } = watch({ extend }, lease);
      await advance(1_000);
      expect(lost).toHaveLength(1);
      expect(lost[0].at).toBe(1_000);
      expect(lost[0].error).toBeInstanceOf(LockLostError);
      expect(lost[0].error.reason).toBe('lost');
      expect(lost[0].error.keys).toEqual(['a', 'b']);
      await advance(20_000);
      expect(extend).toHaveBeenCalledTimes(1);
      expect(lost).toHaveLength(1);
    });

    it("renewals failing: retried while the lease may be ours, then 'expired' once", async () => {
      const failure = new Error('ECONNRESET');
      const at: number[] = [];
      const extend = jest.fn(async () => {
        at.push(time.now());
        throw failure;
      });
      const lease = leaseFor();
      const validUntil = lease.validUntil;
      const { lost } = watch({ extend }, lease);
      await advance(validUntil - 1);
      expect(lost).toEqual([]);
      // Retried, faster as the end comes closer, never more than ttl / 3 apart.
      expect(at.length).toBeGreaterThanOrEqual(5);
      let last = 0;
      for (const t of at) {
        expect(t - last).toBeLessThanOrEqual(TTL / 3);
        expect(t).toBeLessThan(validUntil);
        last = t;
      }
      await advance(1);
      expect(lost).toHaveLength(1);
      expect(lost[0].at).toBe(validUntil);
      expect(lost[0].error.reason).toBe('expired');
      const calls = extend.mock.calls.length;
      await advance(20_000);
      expect(extend).toHaveBeenCalledTimes(calls);
      expect(lost).toHaveLength(1);
    });

    it('a renewal failing once is retried, and renewals go on when it succeeds', async () => {
      const r = renewing();
      const impl = r.extend.getMockImplementation()!;
      r.extend.mockImplementationOnce(async () => {
        throw new Error('timeout');
      });
      r.extend.mockImplementation(impl);
      const lease = leaseFor();
      const { lost } = watch(r, lease);
      await advance(10_000);
      expect(r.extend.mock.calls.length).toBeGreaterThanOrEqual(9);
      expect(lost).toEqual([]);
      expect(lease.validUntil).toBeGreaterThan(time.now());
    });

    it("renewals failing down to the lease's last millisecond: 'expired' at validUntil", async () => {
      // 1500 ms left at the first renewal: retried at 1000, 1750, 2125, 2313, 2407, 2454, 2477,
      // 2489, 2495, 2498 and 2499. The one at 2499, woken from the 1 ms wake-up group, waits for
      // its answer at most until the lease's end 1 ms later: it goes back to sleep in the group
      // being woken, due at the very time that wake-up pass counts as now.
      const at: number[] = [];
      const extend = jest.fn(async () => {
        at.push(time.now());
        throw new Error('ECONNRESET');
      });
      const lease: TestLease = { keys: ['k'], validUntil: 2_500 };
      const { lost } = watch({ extend }, lease);
      await advance(2_500);
      expect(lost.map((l) => [l.at, l.error.reason])).toEqual([[2_500, 'expired']]);
      expect(at.length).toBeGreaterThanOrEqual(5);
      expect(Math.max(...at)).toBeLessThan(2_500);
    });

    it("a renewal that never answers: 'expired' at the lease's validUntil, not later", async () => {
      let answer!: (ok: boolean) => void;
      const extend = jest.fn(() => new Promise<boolean>((resolve) => (answer = resolve)));
      const lease = leaseFor();
      const { lost } = watch({ extend }, lease);
      await advance(lease.validUntil - 1);
      expect(extend).toHaveBeenCalledTimes(1);
      expect(lost).toEqual([]);
      await advance(1);
      expect(lost).toHaveLength(1);
      expect(lost[0].at).toBe(lease.validUntil);
      expect(lost[0].error.reason).toBe('expired');
      // Its answer, when it comes at last, changes nothing.
      answer(true);
      await advance(20_000);
      expect(extend).toHaveBeenCalledTimes(1);
      expect(lost).toHaveLength(1);
    });

    it("an event loop paused past validUntil: 'expired' before any renewal is sent", async () => {
      const r = renewing();
      const lease = leaseFor();
      const { lost } = watch(r, lease);
      await time.pause(5_000);
      expect(r.extend).not.toHaveBeenCalled();
      expect(lost).toHaveLength(1);
      expect(lost[0].error.reason).toBe('expired');
      expect(lost[0].at).toBe(5_000);
      await advance(20_000);
      expect(r.extend).not.toHaveBeenCalled();
      expect(lost).toHaveLength(1);
    });

    it('an event loop paused for less than the lease: renewed at once, nothing lost', async () => {
      const r = renewing();
      const lease = leaseFor();
      const { lost } = watch(r, lease);
      await time.pause(2_500);
      expect(r.at).toEqual([2_500]);
      expect(r.extend).toHaveBeenLastCalledWith(lease, TTL, true);
      await advance(5_000);
      expect(lost).toEqual([]);
    });
  });

  describe('maxHold', () => {
    it("reached before the first renewal: 'maxHold' at maxHold, nothing renewed", async () => {
      const r = renewing();
      const { lost } = watch(r, leaseFor(), { maxHold: 800 });
      await advance(799);
      expect(lost).toEqual([]);
      await advance(1);
      expect(lost).toHaveLength(1);
      expect(lost[0].at).toBe(800);
      expect(lost[0].error.reason).toBe('maxHold');
      await advance(20_000);
      expect(r.extend).not.toHaveBeenCalled();
      expect(lost).toHaveLength(1);
    });

    it('the renewal ttl is capped to what is left of maxHold, and none follows', async () => {
      const r = renewing();
      const lease = leaseFor();
      const { lost } = watch(r, lease, { maxHold: 4_500 });
      await advance(2_000);
      // At 1000, 3500 ms were left: the full ttl. At 2000, 2500 were left.
      expect(r.extend.mock.calls.map((c) => c[1])).toEqual([TTL, 2_500]);
      await advance(20_000);
      expect(r.extend).toHaveBeenCalledTimes(2);
      expect(lost).toHaveLength(1);
    });

    it("renewals capped by maxHold: 'maxHold' when it is reached", async () => {
      const r = renewing();
      const lease = leaseFor();
      const { lost } = watch(r, lease, { maxHold: 4_500 });
      await advance(4_500);
      // Reported once, by maxHold at the latest, as maxHold (renewals stopped on purpose).
      expect(lost.map((l) => l.error.reason)).toEqual(['maxHold']);
      expect(lost[0].at).toBeLessThanOrEqual(4_500);
    });

    it("renewals capped by maxHold: the loss is reported no later than the lease's end", async () => {
      const r = renewing();
      const lease = leaseFor();
      const { lost } = watch(r, lease, { maxHold: 4_500 });
      await advance(2_000);
      // The last renewal (at 2000, for the 2500 ms left) made the lease valid until 4473.
      expect(lease.validUntil).toBe(2_000 + 2_500 - leases.drift(2_500));
      await advance(lease.validUntil - time.now());
      expect(lost).toHaveLength(1);
      expect(lost[0].at).toBeLessThanOrEqual(lease.validUntil);
    });

    it("without renewals, a lease longer than maxHold: 'maxHold' at maxHold", async () => {
      const r = renewing();
      const { lost } = watch(r, leaseFor(10_000), { ttl: 10_000, maxHold: 4_000, renews: false });
      await advance(3_999);
      expect(lost).toEqual([]);
      await advance(1);
      expect(lost).toHaveLength(1);
      expect(lost[0].at).toBe(4_000);
      expect(lost[0].error.reason).toBe('maxHold');
      expect(r.extend).not.toHaveBeenCalled();
    });
  });

  describe('without renewals', () => {
    it("never renews, and reports 'expired' at the lease's validUntil", async () => {
      const r = renewing();
      const lease = leaseFor();
      const { lost } = watch(r, lease, { renews: false });
      await advance(lease.validUntil - 1);
      expect(lost).toEqual([]);
      await advance(1);
      expect(lost).toHaveLength(1);
      expect(lost[0].at).toBe(lease.validUntil);
      expect(lost[0].error.reason).toBe('expired');
      await advance(20_000);
      expect(r.extend).not.toHaveBeenCalled();
      expect(lost).toHaveLength(1);
    });

    it('a lease renewed by other means meanwhile is followed to its new end', async () => {
      const r = renewing();
      const lease = leaseFor();
      const { lost } = watch(r, lease, { renews: false });
      await advance(2_000);
      lease.validUntil = 6_000;
      await advance(3_999);
      expect(lost).toEqual([]);
      await advance(1);
      expect(lost.map((l) => [l.at, l.error.reason])).toEqual([[6_000, 'expired']]);
    });

    it('stop() before the lease ends: no report', async () => {
      const { dog, lost } = watch(renewing(), leaseFor(), { renews: false });
      await advance(1_000);
      dog.stop();
      await advance(20_000);
      expect(lost).toEqual([]);
    });
  });
});
