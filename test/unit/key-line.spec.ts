import { KeyLine, type LineListener, type LineWaiter } from '../../lib/redis/key-line';
import { RedisLease } from '../../lib/redis/redis-lease';
import { type ManualClock, manualPerformanceNow } from './support/clock';

/** A waiter that counts its wake-ups. */
class CountingWaiter implements LineWaiter {
  wakes = 0;

  constructor(readonly token: string) {}

  wake(): void {
    this.wakes++;
  }
}

let leaseCount = 0;
/** A single-key lease valid until `validUntil`. */
function leaseUntil(validUntil: number, key = 'k'): RedisLease {
  leaseCount++;
  return new RedisLease([key], `p.${leaseCount}`, [leaseCount], 0, 1_000, false, validUntil, 0);
}

/** Seeded PRNG (mulberry32): the same seed gives the same operation sequence. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)],
    chance: (p: number) => next() < p,
  };
}

describe('KeyLine', () => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = manualPerformanceNow(10_000);
  });
  afterEach(() => jest.restoreAllMocks());

  describe('the line of waiters', () => {
    it('is FIFO; a `first` join goes to the front', () => {
      const line = new KeyLine('k');
      const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((t) => new CountingWaiter(t));
      expect(line.head).toBeUndefined();
      expect(line.length).toBe(0);
      line.join(a, false);
      line.join(b, false);
      expect(line.head).toBe(a);
      line.join(c, true);
      expect(line.head).toBe(c);
      line.join(d, false);
      expect(line.length).toBe(4);
      const order: LineWaiter[] = [];
      while (line.head) {
        const h: LineWaiter = line.head;
        order.push(h);
        line.leave(h);
      }
      expect(order).toEqual([c, a, b, d]);
    });

    it('waiterOf finds a waiting token, and none once it left', () => {
      const line = new KeyLine('k');
      const a = new CountingWaiter('a');
      const b = new CountingWaiter('b');
      line.join(a, false);
      line.join(b, false);
      expect(line.waiterOf('b')).toBe(b);
      expect(line.waiterOf('zzz')).toBeUndefined();
      line.leave(b);
      expect(line.waiterOf('b')).toBeUndefined();
    });

    it('10,000 waiters: leaving from anywhere keeps the others in order, each found by token', () => {
      const line = new KeyLine('k');
      const all = Array.from({ length: 10_000 }, (_, i) => new CountingWaiter(`t${i}`));
      for (const w of all) line.join(w, false);
      // Every 10th leaves from the middle (a short wait running out in the line).
      for (let i = 9; i < all.length; i += 10) line.leave(all[i]);
      const stayed = all.filter((_, i) => i % 10 !== 9);
      expect(line.length).toBe(stayed.length);
      for (const w of [stayed[0], stayed[4_500], stayed[stayed.length - 1]]) {
        expect(line.waiterOf(w.token)).toBe(w);
      }
      expect(line.waiterOf('t9')).toBeUndefined();
      const order: string[] = [];
      while (line.head) {
        const h: LineWaiter = line.head;
        order.push(h.token);
        line.leave(h);
      }
      expect(order).toEqual(stayed.map((w) => w.token));
      expect(line.length).toBe(0);
      // Only the head was ever woken: each once, when the one before it left.
      expect(all.filter((w) => w.wakes > 1)).toEqual([]);
      expect(all[0].wakes).toBe(0);
    });

    it('a waiter that left and joins again goes to the end, found by its token', () => {
      const line = new KeyLine('k');
      const [a, b, c] = ['a', 'b', 'c'].map((t) => new CountingWaiter(t));
      [a, b, c].forEach((w) => line.join(w, false));
      line.leave(b);
      line.join(b, false);
      expect(line.waiterOf('b')).toBe(b);
      const order: LineWaiter[] = [];
      while (line.head) {
        const h: LineWaiter = line.head;
        order.push(h);
        line.leave(h);
      }
      expect(order).toEqual([a, c, b]);
    });

    it('leaving twice, or without having joined, changes nothing and wakes nobody', () => {
      const line = new KeyLine('k');
      const a = new CountingWaiter('a');
      const b = new CountingWaiter('b');
      line.join(a, false);
      line.join(b, false);
      line.leave(new CountingWaiter('x'));
      expect(line.length).toBe(2);
      expect(a.wakes).toBe(0);
      line.leave(a);
      line.leave(a);
      expect(line.length).toBe(1);
      expect(b.wakes).toBe(1);
    });

    it('the head leaving wakes the new head when the key is not held here', () => {
      const line = new KeyLine('k');
      const [a, b, c] = ['a', 'b', 'c'].map((t) => new CountingWaiter(t));
      [a, b, c].forEach((w) => line.join(w, false));
      line.leave(a);
      expect(b.wakes).toBe(1);
      expect(c.wakes).toBe(0);
    });

    it('a waiter behind the head leaving wakes nobody', () => {
      const line = new KeyLine('k');
      const [a, b, c] = ['a', 'b', 'c'].map((t) => new CountingWaiter(t));
      [a, b, c].forEach((w) => line.join(w, false));
      line.leave(b);
      expect(a.wakes + b.wakes + c.wakes).toBe(0);
      expect(line.head).toBe(a);
    });

    it('the head leaving while the key is held here wakes the new head (to sleep on a timer)', () => {
      const line = new KeyLine('k');
      const [a, b, c] = ['a', 'b', 'c'].map((t) => new CountingWaiter(t));
      [a, b, c].forEach((w) => line.join(w, false));
      line.hold(leaseUntil(clock.now() + 1_000));
      line.leave(a);
      // The waiters behind the head have no timer: a head not told it is the head would wait
      // past a lost release message until its deadline.
      expect(b.wakes).toBe(1);
      expect(c.wakes).toBe(0);
    });

    it('the head leaving while the only hold here expired wakes the new head', () => {
      const line = new KeyLine('k');
      const [a, b] = ['a', 'b'].map((t) => new CountingWaiter(t));
      [a, b].forEach((w) => line.join(w, false));
      line.hold(leaseUntil(clock.now() + 100));
      clock.advance(100);
      line.leave(a);
      expect(b.wakes).toBe(1);
    });
  });

  describe('tries', () => {
    it('a try in flight makes the key busy here, not held', () => {
      const line = new KeyLine('k');
      line.startTry();
      expect(line.busyHere()).toBe(true);
      expect(line.heldHere()).toBe(false);
      expect(line.idle()).toBe(false);
      line.endTry();
      expect(line.busyHere()).toBe(false);
      expect(line.idle()).toBe(true);
    });

    it('the last try ending wakes the head; one of two ending does not', () => {
      const line = new KeyLine('k');
      const a = new CountingWaiter('a');
      line.startTry();
      line.startTry();
      line.join(a, false);
      line.endTry();
      expect(a.wakes).toBe(0);
      line.endTry();
      expect(a.wakes).toBe(1);
    });

    it('a try ending while the key is held here wakes nobody', () => {
      const line = new KeyLine('k');
      const a = new CountingWaiter('a');
      line.join(a, false);
      line.startTry();
      // The try took the key: counted as held before the try ends.
      line.hold(leaseUntil(clock.now() + 1_000));
      line.endTry();
      expect(a.wakes).toBe(0);
      expect(line.busyHere()).toBe(true);
    });
  });

  describe('holds', () => {
    it('a hold counts while its lease is valid, and not from validUntil on', () => {
      const line = new KeyLine('k');
      line.hold(leaseUntil(clock.now() + 100));
      expect(line.heldHere()).toBe(true);
      expect(line.busyHere()).toBe(true);
      expect(line.idle()).toBe(false);
      clock.advance(99.9);
      expect(line.heldHere()).toBe(true);
      clock.advance(0.1);
      expect(line.heldHere()).toBe(false);
      expect(line.busyHere()).toBe(false);
      expect(line.idle()).toBe(true);
    });

    it('heldHere(now) answers for the time given', () => {
      const line = new KeyLine('k');
      const until = clock.now() + 100;
      line.hold(leaseUntil(until));
      expect(line.heldHere(until - 1)).toBe(true);
      expect(line.heldHere(until)).toBe(false);
    });

    it('an ended lease holds nothing up', () => {
      const line = new KeyLine('k');
      const l = leaseUntil(clock.now() + 10_000);
      line.hold(l);
      l.end();
      expect(line.heldHere()).toBe(false);
      expect(line.idle()).toBe(true);
    });

    it('a lease renewed while held keeps the key held past its first expiry', () => {
      const line = new KeyLine('k');
      const l = leaseUntil(clock.now() + 100);
      line.hold(l);
      clock.advance(50);
      l.renewed(clock.now(), 1_000, 12);
      clock.advance(100);
      expect(line.heldHere()).toBe(true);
      expect(line.holdsEnd()).toBe(l.validUntil);
    });

    it('endHold(wakeHead) wakes the head; endHold without wakeHead does not', () => {
      const line = new KeyLine('k');
      const a = new CountingWaiter('a');
      line.join(a, false);
      const l1 = leaseUntil(clock.now() + 1_000);
      line.hold(l1);
      line.endHold(l1, false);
      expect(a.wakes).toBe(0);
      expect(line.heldHere()).toBe(false);
      const l2 = leaseUntil(clock.now() + 1_000);
      line.hold(l2);
      line.endHold(l2, true);
      expect(a.wakes).toBe(1);
    });

    it('endHold of one of two valid holds: still held, nobody woken', () => {
      const line = new KeyLine('k');
      const a = new CountingWaiter('a');
      line.join(a, false);
      const l1 = leaseUntil(clock.now() + 1_000);
      const l2 = leaseUntil(clock.now() + 2_000);
      line.hold(l1);
      line.hold(l2);
      line.endHold(l1, true);
      expect(line.heldHere()).toBe(true);
      expect(a.wakes).toBe(0);
      expect(line.holdsEnd()).toBe(l2.validUntil);
    });

    it('passHold: the hold goes on under the new lease, the old one no longer counts', () => {
      const line = new KeyLine('k');
      const from = leaseUntil(clock.now() + 1_000);
      const to = leaseUntil(clock.now() + 500);
      line.hold(from);
      line.passHold(from, to);
      expect(line.holdsEnd()).toBe(to.validUntil);
      line.endHold(to, false);
      expect(line.heldHere()).toBe(false);
      // The old lease is not held any more: ending it changes nothing.
      line.endHold(from, false);
      expect(line.heldHere()).toBe(false);
    });

    it('passHold from a hold no longer there (expired and dropped) still holds the new lease', () => {
      const line = new KeyLine('k');
      const from = leaseUntil(clock.now() + 10);
      line.hold(from);
      clock.advance(20);
      expect(line.heldHere()).toBe(false);
      const to = leaseUntil(clock.now() + 500);
      line.passHold(from, to);
      expect(line.heldHere()).toBe(true);
      expect(line.holdsEnd()).toBe(to.validUntil);
    });

    it('holdEnded (a hold lost or run out) wakes the head once nothing is busy here', () => {
      const line = new KeyLine('k');
      const a = new CountingWaiter('a');
      line.join(a, false);
      const l = leaseUntil(clock.now() + 1_000);
      line.hold(l);
      line.holdEnded();
      expect(a.wakes).toBe(0);
      l.end();
      line.holdEnded();
      expect(a.wakes).toBe(1);
      line.startTry();
      line.holdEnded();
      expect(a.wakes).toBe(1);
    });

    it('holdsEnd: Infinity with no hold, else when the first hold runs out', () => {
      const line = new KeyLine('k');
      expect(line.holdsEnd()).toBe(Infinity);
      const late = leaseUntil(clock.now() + 2_000);
      const early = leaseUntil(clock.now() + 700);
      line.hold(late);
      line.hold(early);
      expect(line.holdsEnd()).toBe(early.validUntil);
      line.endHold(early, false);
      expect(line.holdsEnd()).toBe(late.validUntil);
      line.endHold(late, false);
      expect(line.holdsEnd()).toBe(Infinity);
    });
  });

  describe('an expired hold that was never released (defect 1)', () => {
    it('no longer makes heldHere() true after another hold of the key ends', () => {
      const line = new KeyLine('k');
      const a = new CountingWaiter('a');
      line.join(a, false);
      // A holder stalled past its lease and never released.
      const stale = leaseUntil(clock.now() + 100);
      line.hold(stale);
      clock.advance(150);
      // Another caller of this process took the key since, and gives it back now.
      const next = leaseUntil(clock.now() + 1_000);
      line.hold(next);
      expect(line.heldHere()).toBe(true);
      line.endHold(next, true);
      expect(line.heldHere()).toBe(false);
      expect(line.busyHere()).toBe(false);
      expect(a.wakes).toBe(1);
      line.leave(a);
      expect(line.idle()).toBe(true);
    });

    it('does not keep the head waiting: the head is woken when the other hold ends', () => {
      const line = new KeyLine('k');
      const stale = leaseUntil(clock.now() + 100);
      const next = leaseUntil(clock.now() + 1_000);
      line.hold(stale);
      line.hold(next);
      clock.advance(150);
      const a = new CountingWaiter('a');
      line.join(a, false);
      line.endHold(next, true);
      expect(a.wakes).toBe(1);
      expect(line.heldHere()).toBe(false);
    });

    it('alone, it does not keep the line from being idle', () => {
      const line = new KeyLine('k');
      line.hold(leaseUntil(clock.now() + 100));
      expect(line.idle()).toBe(false);
      clock.advance(100);
      expect(line.idle()).toBe(true);
      expect(line.holdsEnd()).toBe(Infinity);
    });
  });

  describe('holdsEnd with an expired hold not dropped yet', () => {
    it('is when the first valid hold runs out, not when an expired one did', () => {
      const line = new KeyLine('k');
      // Two holds at once (a grant landing before the release reply, say); the first expires.
      const stale = leaseUntil(clock.now() + 100);
      const current = leaseUntil(clock.now() + 1_000);
      line.hold(stale);
      line.hold(current);
      clock.advance(150);
      expect(line.heldHere()).toBe(true);
      // A waiter sleeps until then (waitInLine's untilHoldsEnd): a time in the past makes it
      // poll every millisecond while `current` holds the key.
      expect(line.holdsEnd()).toBe(current.validUntil);
    });
  });

  describe('local handoffs', () => {
    it('counts handoffs in a row up to the limit; going public starts over', () => {
      const line = new KeyLine('k');
      expect(line.mayHandOff(2, false)).toBe(true);
      line.handedOff();
      expect(line.mayHandOff(2, false)).toBe(true);
      line.handedOff();
      expect(line.mayHandOff(2, false)).toBe(false);
      expect(line.mayHandOff(3, false)).toBe(true);
      line.wentPublic();
      expect(line.mayHandOff(2, false)).toBe(true);
      expect(line.mayHandOff(0, false)).toBe(false);
    });

    it('on a queueing group, passes on past the limit only while nobody else is known to wait', () => {
      const line = new KeyLine('k');
      line.handedOff();
      line.handedOff();
      // A new line: until a script found nobody else queued, someone may be.
      expect(line.mayHandOff(2, true)).toBe(false);
      expect(line.quietSince).toBe(Infinity);
      line.nobodyElseSince(line.noticeMark(), 1_000);
      expect(line.quietSince).toBe(1_000);
      expect(line.mayHandOff(2, true)).toBe(true);
      // A notice: a waiter of another process queued. The count is already past the limit.
      line.othersWait();
      expect(line.mayHandOff(2, true)).toBe(false);
      line.wentPublic();
      expect(line.mayHandOff(2, true)).toBe(true);
      line.handedOff();
      line.handedOff();
      expect(line.mayHandOff(2, true)).toBe(false);
      // Strict FIFO (limit 0) never passes on, whoever waits.
      expect(new KeyLine('k').mayHandOff(0, true)).toBe(false);
    });

    it('a turn begun by a key that came after a wait lets every caller already waiting have it once, past the limit', () => {
      const line = new KeyLine('k');
      const [holder, ...behind] = ['h', 'a', 'b', 'c', 'd'].map((t) => new CountingWaiter(t));
      for (const w of [holder, ...behind]) line.join(w, false);
      line.othersWait();
      // The holder is still in the line when it takes the key: the turn counts those behind it.
      line.turnBegins(holder.token, 10);
      expect(line.passesLeft(2)).toBe(4);
      for (let i = 0; i < 4; i++) {
        expect(line.mayHandOff(2, true)).toBe(true);
        line.handedOff();
      }
      expect(line.mayHandOff(2, true)).toBe(false);
      expect(line.passesLeft(2)).toBe(0);
      // Going public ends the turn: the next run counts the limit alone.
      line.wentPublic();
      expect(line.passesLeft(2)).toBe(2);
      // A turn shorter than the limit leaves the limit; limit 0 stays strict FIFO.
      line.turnBegins('x', 10);
      expect(line.passesLeft(6)).toBe(6);
      // A turn is at most `most` passes, however long the line.
      line.turnBegins('x', 3);
      expect(line.passesLeft(2)).toBe(3);
      line.turnBegins(holder.token, 10);
      expect(line.mayHandOff(0, true)).toBe(false);
      expect(line.passesLeft(0)).toBe(0);
    });

    it('believes "nobody else queued" only if no notice came since the script was sent', () => {
      const line = new KeyLine('k');
      line.othersWait();
      line.handedOff();
      const mark = line.noticeMark();
      // A notice came between the script and its reply: it may be of a later waiter.
      line.othersWait();
      line.nobodyElseSince(mark, 1);
      expect(line.mayHandOff(1, true)).toBe(false);
      line.nobodyElseSince(line.noticeMark(), 2);
      expect(line.mayHandOff(1, true)).toBe(true);
    });

    it('runs one refill at a time, and says which is on its way until it settles', async () => {
      const line = new KeyLine('k');
      let answer!: () => void;
      let sent = 0;
      const send = () => {
        sent++;
        return new Promise<void>((resolve) => (answer = resolve));
      };
      expect(line.refilling).toBeUndefined();
      line.refillOnce(send);
      line.refillOnce(send);
      expect(sent).toBe(1);
      const pending = line.refilling;
      expect(pending).toBeInstanceOf(Promise);
      answer();
      await pending;
      expect(line.refilling).toBeUndefined();
      line.refillOnce(send);
      expect(sent).toBe(2);
    });
  });

  describe('listening', () => {
    function listener() {
      let ready!: () => void;
      let fail!: (e: Error) => void;
      const l: LineListener & { stop: jest.Mock } = {
        ready: new Promise<void>((res, rej) => {
          ready = res;
          fail = rej;
        }),
        stop: jest.fn(),
      };
      return { l, ready: () => ready(), fail: (e: Error) => fail(e) };
    }

    it('subscribes once, and hears releases once the subscription is ready', async () => {
      const line = new KeyLine('k');
      const first = listener();
      const subscribe = jest.fn(() => first.l);
      const p1 = line.listen(subscribe);
      const p2 = line.listen(subscribe);
      expect(subscribe).toHaveBeenCalledTimes(1);
      expect(line.hearsReleases).toBe(false);
      first.ready();
      await Promise.all([p1, p2]);
      expect(line.hearsReleases).toBe(true);
    });

    it('stopListening stops the subscription; the next listen subscribes again', async () => {
      const line = new KeyLine('k');
      const first = listener();
      first.ready();
      await line.listen(() => first.l);
      line.stopListening();
      expect(first.l.stop).toHaveBeenCalledTimes(1);
      expect(line.hearsReleases).toBe(false);
      const second = listener();
      const subscribe = jest.fn(() => second.l);
      void line.listen(subscribe);
      expect(subscribe).toHaveBeenCalledTimes(1);
    });

    it('a subscription stopped before it was ready does not count as hearing releases', async () => {
      const line = new KeyLine('k');
      const first = listener();
      const p = line.listen(() => first.l);
      line.stopListening();
      first.ready();
      await p;
      expect(line.hearsReleases).toBe(false);
    });

    it('a failed subscription: the line does not hear releases, the failure is the caller’s', async () => {
      const line = new KeyLine('k');
      const first = listener();
      const p = line.listen(() => first.l);
      first.fail(new Error('no subscriber'));
      await expect(p).rejects.toThrow('no subscriber');
      expect(line.hearsReleases).toBe(false);
    });

    it('the last waiter leaving stops listening', async () => {
      const line = new KeyLine('k');
      const first = listener();
      first.ready();
      await line.listen(() => first.l);
      const [a, b] = ['a', 'b'].map((t) => new CountingWaiter(t));
      line.join(a, false);
      line.join(b, false);
      line.leave(a);
      expect(first.l.stop).not.toHaveBeenCalled();
      line.leave(b);
      expect(first.l.stop).toHaveBeenCalledTimes(1);
      expect(line.hearsReleases).toBe(false);
    });
  });

  describe('invariants under random joins, leaves, tries, holds, expiries and releases', () => {
    type Op =
      | 'join'
      | 'leaveHead'
      | 'leaveOther'
      | 'leaveStranger'
      | 'startTry'
      | 'endTry'
      | 'hold'
      | 'passHold'
      | 'endHold'
      | 'endStranger'
      | 'leaseEnd'
      | 'holdEnded'
      | 'renew'
      | 'advance';
    const OPS: readonly Op[] = [
      'join',
      'join',
      'leaveHead',
      'leaveOther',
      'leaveStranger',
      'startTry',
      'endTry',
      'endTry',
      'hold',
      'hold',
      'passHold',
      'endHold',
      'endHold',
      'endStranger',
      'leaseEnd',
      'holdEnded',
      'renew',
      'advance',
      'advance',
      'advance',
    ];

    /** How often the interesting situations came up (so the checks are not vacuous). */
    const situations = () => ({
      wakeRequired: 0,
      newHeadOfFreeKey: 0,
      heldWithStaleLease: 0,
      heldTwice: 0,
      firstJoin: 0,
    });
    type Seen = ReturnType<typeof situations>;

    /** One random sequence, checked after each step; throws with the steps that led there. */
    function run(seed: number, steps: number, seen: Seen): void {
      const rnd = prng(seed);
      const line = new KeyLine('k');
      // The model: what the line must agree with.
      const waiters: CountingWaiter[] = [];
      const held: RedisLease[] = [];
      let trying = 0;
      let tokens = 0;
      const log: string[] = [];

      const validHeld = () => held.filter((l) => l.validUntil > clock.now());
      const fail = (what: string) => {
        throw new Error(
          `seed ${seed}, after step ${log.length}: ${what}\n` +
            log.map((s, i) => `  ${i + 1}. ${s}`).join('\n'),
        );
      };
      const checkEq = (what: string, actual: unknown, expected: unknown) => {
        if (!Object.is(actual, expected))
          fail(`${what}: got ${String(actual)}, expected ${String(expected)}`);
      };

      for (let step = 0; step < steps; step++) {
        const op = rnd.pick(OPS);
        const wakesBefore = new Map(waiters.map((w) => [w, w.wakes]));
        const headBefore = waiters[0];
        const woken = () => waiters.filter((w) => w.wakes !== (wakesBefore.get(w) ?? 0));
        /** After this op, a key not busy here with waiters present must have woken its head. */
        let mustWakeHead = false;
        switch (op) {
          case 'join': {
            const w = new CountingWaiter(`t${++tokens}`);
            const first = rnd.chance(0.3);
            line.join(w, first);
            if (first && waiters.length > 0) seen.firstJoin++;
            if (first) waiters.unshift(w);
            else waiters.push(w);
            log.push(`join ${w.token}${first ? ' first' : ''}`);
            break;
          }
          case 'leaveHead':
          case 'leaveOther': {
            if (waiters.length === 0) continue;
            const i = op === 'leaveHead' ? 0 : rnd.int(0, waiters.length - 1);
            const [w] = waiters.splice(i, 1);
            line.leave(w);
            log.push(`leave ${w.token} (#${i})`);
            break;
          }
          case 'leaveStranger':
            line.leave(new CountingWaiter('stranger'));
            log.push('leave a waiter not in line');
            break;
          case 'startTry':
            trying++;
            line.startTry();
            log.push('startTry');
            break;
          case 'endTry':
            if (trying === 0) continue;
            trying--;
            line.endTry();
            mustWakeHead = true;
            log.push('endTry');
            break;
          case 'hold': {
            const l = leaseUntil(clock.now() + rnd.int(-300, 1_500));
            held.push(l);
            line.hold(l);
            log.push(`hold ${l.token} until ${l.validUntil}`);
            break;
          }
          case 'passHold': {
            const from =
              held.length > 0 && rnd.chance(0.85)
                ? rnd.pick(held)
                : leaseUntil(clock.now() + rnd.int(-300, 1_500));
            const to = leaseUntil(
              rnd.chance(0.8) ? from.validUntil : clock.now() + rnd.int(0, 900),
            );
            const i = held.indexOf(from);
            if (i >= 0) held[i] = to;
            else held.push(to);
            line.passHold(from, to);
            log.push(`passHold ${from.token} -> ${to.token} until ${to.validUntil}`);
            break;
          }
          case 'endHold':
          case 'endStranger': {
            const l =
              op === 'endHold' && held.length > 0
                ? rnd.pick(held)
                : leaseUntil(clock.now() + rnd.int(-300, 1_500));
            const i = held.indexOf(l);
            if (i >= 0) held.splice(i, 1);
            const wakeHead = rnd.chance(0.6);
            line.endHold(l, wakeHead);
            mustWakeHead = wakeHead;
            log.push(`endHold ${l.token}${i < 0 ? ' (not held)' : ''} wakeHead=${wakeHead}`);
            break;
          }
          case 'leaseEnd': {
            if (held.length === 0) continue;
            const l = rnd.pick(held);
            l.end();
            log.push(`${l.token}.end()`);
            break;
          }
          case 'holdEnded':
            line.holdEnded();
            mustWakeHead = true;
            log.push('holdEnded');
            break;
          case 'renew': {
            // The watchdog renews a lease while it is valid (a renewal answering late keeps
            // the start it was sent at, so it never revives a lease the line already dropped).
            const valid = validHeld();
            if (valid.length === 0) continue;
            const l = rnd.pick(valid);
            l.renewed(clock.now(), rnd.int(10, 1_500), 2);
            log.push(`renew ${l.token} until ${l.validUntil}`);
            break;
          }
          case 'advance': {
            const ms = rnd.chance(0.2) ? rnd.int(0, 3) : rnd.int(1, 600);
            clock.advance(ms);
            log.push(`advance ${ms} ms to ${clock.now()}`);
            break;
          }
        }

        // heldHere: iff some held, not ended lease is valid now.
        const heldNow = validHeld().length > 0;
        checkEq('heldHere()', line.heldHere(), heldNow);
        checkEq('busyHere()', line.busyHere(), trying > 0 || heldNow);
        checkEq('idle()', line.idle(), waiters.length === 0 && trying === 0 && !heldNow);
        // FIFO, `first` joins in front.
        checkEq('length', line.length, waiters.length);
        checkEq('head', line.head, waiters[0]);
        for (const w of waiters) checkEq(`waiterOf(${w.token})`, line.waiterOf(w.token), w);
        // holdsEnd: Infinity with nothing held; never later than the first valid hold's end
        // (a waiter sleeping until then never oversleeps a hold's end).
        const firstEnd = Math.min(...validHeld().map((l) => l.validUntil));
        const holdsEnd = line.holdsEnd();
        if (!heldNow) checkEq('holdsEnd() with nothing held', holdsEnd, Infinity);
        else if (!(holdsEnd <= firstEnd))
          fail(`holdsEnd() ${holdsEnd} is after the first valid hold's end ${firstEnd}`);
        // Wake-ups.
        const busy = trying > 0 || heldNow;
        const head = waiters[0];
        if (mustWakeHead && head && !busy) seen.wakeRequired++;
        if (op.startsWith('leave') && head && head !== headBefore && !busy) seen.newHeadOfFreeKey++;
        if (heldNow && held.some((l) => l.validUntil <= clock.now())) seen.heldWithStaleLease++;
        if (validHeld().length > 1) seen.heldTwice++;
        if (mustWakeHead && head && !busy && head.wakes === (wakesBefore.get(head) ?? 0))
          fail(`${op}: the key is free here but head ${head.token} was not woken`);
        if (
          (op === 'leaveHead' || op === 'leaveOther') &&
          head &&
          head !== headBefore &&
          !busy &&
          head.wakes === (wakesBefore.get(head) ?? 0)
        )
          fail(`${op}: new head ${head.token} of a free key was not woken`);
        if (['join', 'startTry', 'hold', 'passHold', 'renew', 'advance', 'leaseEnd'].includes(op))
          checkEq(`${op} woke`, woken().length, 0);
        // Only a head is ever woken.
        for (const w of woken()) if (w !== head) fail(`${op} woke ${w.token}, not the head`);
      }
    }

    /** Runs the seeds; the sequences went through every situation the checks are about. */
    function runAll(seeds: number[], steps: number): void {
      const seen = situations();
      for (const seed of seeds) run(seed, steps, seen);
      const rare = Object.entries(seen).filter(([, count]) => count < 50);
      expect(rare).toEqual([]);
    }

    it('hold over 300 seeded sequences of 150 steps', () => {
      runAll(
        Array.from({ length: 300 }, (_, i) => i + 1),
        150,
      );
    });

    it('hold over 20 seeded sequences of 2000 steps', () => {
      runAll(
        Array.from({ length: 20 }, (_, i) => i + 1_001),
        2_000,
      );
    });
  });
});
