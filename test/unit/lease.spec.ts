import { Leases } from '../../lib/core/lease';
import type { Taken } from '../../lib/redis/protocol/lock-protocol';
import { RedisLease, RedisLeases, type RedisTaker } from '../../lib/redis/redis-lease';
import { type ManualClock, manualPerformanceNow } from './support/clock';

const DRIFT_FACTOR = 0.01;

interface LeaseFields {
  keys: readonly string[];
  token: string;
  fences: readonly number[];
  spare: number;
  ttl: number;
  uncontended: boolean;
  validUntil: number;
  waitedMs: number;
}

function lease(over: Partial<LeaseFields> = {}): RedisLease {
  const o: LeaseFields = {
    keys: ['k'],
    token: 'p.1',
    fences: [10],
    spare: 3,
    ttl: 1_000,
    uncontended: true,
    validUntil: 0,
    waitedMs: 0,
    ...over,
  };
  return new RedisLease(
    o.keys,
    o.token,
    o.fences,
    o.spare,
    o.ttl,
    o.uncontended,
    o.validUntil,
    o.waitedMs,
  );
}

describe('Lease', () => {
  it('is valid strictly before validUntil', () => {
    const l = lease({ validUntil: 500 });
    expect(l.validAt(0)).toBe(true);
    expect(l.validAt(499.999)).toBe(true);
    expect(l.validAt(500)).toBe(false);
    expect(l.validAt(501)).toBe(false);
  });

  it('renewed(): the new ttl, valid until start + ttl - drift', () => {
    const l = lease({ ttl: 1_000, validUntil: 100 });
    l.renewed(2_000, 3_000, 32);
    expect(l.ttl).toBe(3_000);
    expect(l.validUntil).toBe(4_968);
    expect(l.validAt(4_967)).toBe(true);
    expect(l.validAt(4_968)).toBe(false);
  });

  it('end(): valid at no time any more, and stays so', () => {
    const l = lease({ validUntil: 1e12 });
    l.end();
    expect(l.validUntil).toBe(-Infinity);
    expect(l.validAt(-1e15)).toBe(false);
    expect(l.validAt(0)).toBe(false);
  });

  it('starts not released', () => {
    expect(lease().released).toBe(false);
  });
});

describe('Leases', () => {
  let clock: ManualClock;
  const leases = new RedisLeases(DRIFT_FACTOR);
  beforeEach(() => {
    clock = manualPerformanceNow(50_000);
    jest.spyOn(Date, 'now').mockReturnValue(1_700_000_000_000);
  });
  afterEach(() => jest.restoreAllMocks());

  it.each([
    [0, 2],
    [10, 2],
    [49, 2],
    [50, 3],
    [1_000, 12],
    [1_049, 12],
    [1_050, 13],
    [30_000, 302],
  ])('drift(%i) = round(ttl * factor) + 2 = %i', (ttl, drift) => {
    expect(leases.drift(ttl)).toBe(drift);
  });

  it('drift follows the factor', () => {
    expect(new Leases(0).drift(10_000)).toBe(2);
    expect(new Leases(0.1).drift(10_000)).toBe(1_002);
  });

  it('validUntil: start + ttl - drift', () => {
    expect(leases.validUntil(1_000, 10_000)).toBe(1_000 + 10_000 - 102);
    expect(leases.validUntil(0.5, 30)).toBe(0.5 + 30 - 2);
  });

  describe('taken()', () => {
    const taken: Taken = { kind: 'ok', fences: [7, 8], start: 49_900, spare: 2, uncontended: true };
    const taker: RedisTaker = { token: 'p.9', ttl: 10_000, startedAt: 49_000 };

    it("a lease for the taker: its token and ttl, the round's fences, spare and flag", () => {
      const l = leases.taken(['a', 'b'], taker, taken);
      expect(l).toBeInstanceOf(RedisLease);
      expect(l.keys).toEqual(['a', 'b']);
      expect(l.token).toBe('p.9');
      expect(l.ttl).toBe(10_000);
      expect(l.fences).toEqual([7, 8]);
      expect(l.spare).toBe(2);
      expect(l.uncontended).toBe(true);
      expect(l.released).toBe(false);
    });

    it('valid from when the round started (not from now), less the drift', () => {
      const l = leases.taken(['a'], taker, taken);
      expect(l.validUntil).toBe(49_900 + 10_000 - 102);
      expect(l.validUntil).toBe(leases.validUntil(taken.start, taker.ttl));
    });

    it('waited from when the taker started; acquired at the wall clock', () => {
      clock.set(50_250);
      const l = leases.taken(['a'], taker, taken);
      expect(l.waitedMs).toBe(1_250);
      expect(l.acquiredAt).toBe(1_700_000_000_000);
    });
  });

  describe('passedOn()', () => {
    const TTL = 1_000;
    // drift(1000) = 12: a fresh lease has at least ttl - 2 * drift = 976 ms left.
    const next: RedisTaker = { token: 'p.2', ttl: TTL, startedAt: 49_900 };
    const fresh = (over: Partial<LeaseFields> = {}) =>
      lease({
        keys: ['k'],
        token: 'p.1',
        fences: [10],
        spare: 3,
        ttl: TTL,
        validUntil: clock.now() + TTL - 12,
        waitedMs: 5,
        ...over,
      });

    it('passes on a fresh lease: the next fence, one spare fewer, same token and expiry', () => {
      const from = fresh();
      const to = leases.passedOn(from, next);
      expect(to).toBeInstanceOf(RedisLease);
      expect(to).not.toBe(from);
      expect(to!.keys).toEqual(['k']);
      expect(to!.token).toBe('p.1');
      expect(to!.fences).toEqual([11]);
      expect(to!.spare).toBe(2);
      expect(to!.ttl).toBe(TTL);
      expect(to!.validUntil).toBe(from.validUntil);
      expect(to!.uncontended).toBe(false);
      expect(to!.released).toBe(false);
      expect(to!.waitedMs).toBe(100);
      expect(to!.acquiredAt).toBe(1_700_000_000_000);
      // The lease passed from is left as it was.
      expect(from.fences).toEqual([10]);
      expect(from.spare).toBe(3);
    });

    it('passes on down the block, fence by fence, until no spare is left', () => {
      let l: RedisLease | undefined = fresh({ spare: 2 });
      const fences: number[] = [];
      for (let i = 0; i < 3; i++) {
        l = leases.passedOn(l!, next);
        if (l) fences.push(l.fences[0]);
      }
      expect(fences).toEqual([11, 12]);
      expect(l).toBeUndefined();
    });

    it('goes on with a refilled block: its fences from the first one given, the old ones skipped', () => {
      const from = fresh({ spare: 2 });
      const a = leases.passedOn(from, next)!;
      expect(a.fences).toEqual([11]);
      a.refilled(50, 4);
      const fences: number[] = [];
      let l: RedisLease | undefined = a;
      for (let i = 0; i < 5; i++) {
        l = leases.passedOn(l!, next);
        if (l) fences.push(l.fences[0]);
      }
      expect(fences).toEqual([50, 51, 52, 53]);
      expect(l).toBeUndefined();
    });

    it('undefined with no spare fence', () => {
      expect(leases.passedOn(fresh({ spare: 0 }), next)).toBeUndefined();
    });

    it('undefined when the next caller wants another ttl', () => {
      expect(leases.passedOn(fresh(), { ...next, ttl: TTL + 1 })).toBeUndefined();
      expect(leases.passedOn(fresh(), { ...next, ttl: TTL - 1 })).toBeUndefined();
    });

    it('undefined once the lease is no longer fresh (less than ttl - 2 * drift left)', () => {
      const from = fresh();
      // validUntil - now = 988 - elapsed: fresh while elapsed <= 12.
      clock.advance(12);
      expect(leases.passedOn(from, next)).toBeDefined();
      clock.advance(0.001);
      expect(leases.passedOn(from, next)).toBeUndefined();
    });

    it('undefined for a lease renewed long ago or already ended', () => {
      expect(leases.passedOn(fresh({ validUntil: clock.now() + 500 }), next)).toBeUndefined();
      const ended = fresh();
      ended.end();
      expect(leases.passedOn(ended, next)).toBeUndefined();
    });

    it('a lease just renewed is fresh again', () => {
      const from = fresh();
      clock.advance(400);
      expect(leases.passedOn(from, next)).toBeUndefined();
      from.renewed(clock.now(), TTL, leases.drift(TTL));
      expect(leases.passedOn(from, next)?.validUntil).toBe(clock.now() + TTL - 12);
    });
  });
});
