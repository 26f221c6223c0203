import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { Lease, Leases, type LeaseTaker } from '../../lib/engine/lease';
import { claimBeside } from '../../lib/engine/policies/claim-beside';
import { HoldAtOnce } from '../../lib/engine/policies/hold-at-once';
import { HoldFromReleaseAnswer } from '../../lib/engine/policies/hold-from-release-answer';
import type { SharedGrantee } from '../../lib/engine/shared-wait';
import type { GrantedKey } from '../../lib/engine/waiter';
import type { RedisNode } from '../../lib/redis/redis-node';
import type { Taken } from '../../lib/redis/lock-protocol';
import { GRANT_CLAIM_MS } from '../../lib/redis/script-constants';

// The two ways a grant is held before its claim, each alone (pure units: a fake node answers
// TIME); their runs against a real server are in grant-at-once.spec.ts and shared-holds.spec.ts.

/** The fake server's clock runs this far ahead of `performance.now()`. */
const AHEAD_MS = 1_700_000_000_000;
const serverNow = () => performance.now() + AHEAD_MS;
/** A plain node whose TIME reads the fake server clock. */
const node = {
  time: () => {
    const ms = serverNow();
    return Promise.resolve([String(Math.floor(ms / 1000)), String(Math.floor((ms % 1000) * 1000))]);
  },
} as unknown as Redis;
const leases = new Leases(0.01);
const taker = (ttl = 30_000, acks?: LeaseTaker['acks']): LeaseTaker => ({
  token: 't.1',
  ttl,
  startedAt: performance.now(),
  acks,
});

/** A policy whose clock bound is measured (the TIME answer has come). */
async function measured(): Promise<HoldAtOnce> {
  const policy = HoldAtOnce.of([node], leases)!;
  policy.expectGrants();
  await new Promise((resolve) => setImmediate(resolve));
  return policy;
}

describe('HoldAtOnce', () => {
  it('runs only on one plain node', () => {
    expect(HoldAtOnce.of([node], leases)).toBeInstanceOf(HoldAtOnce);
    expect(HoldAtOnce.of([node, node, node], leases)).toBeUndefined();
    expect(HoldAtOnce.of([{ isCluster: true } as unknown as RedisNode], leases)).toBeUndefined();
  });

  it('holds a fresh grant for its claim window, its claim to go out at once', async () => {
    const policy = await measured();
    const grant: GrantedKey = { fence: 7, spare: 2, serverMs: serverNow() };
    const taken = policy.taken(taker(), grant);
    expect(taken).toMatchObject({ kind: 'ok', fences: [7], spare: 2, claimNow: true });
    expect(taken!.ttl).toBe(GRANT_CLAIM_MS);
    // The window surely ends no later than the server's: it starts no later than the grant.
    expect(taken!.start).toBeLessThanOrEqual(grant.serverMs! - AHEAD_MS);
    // A lease shorter than the window keeps its own length.
    expect(policy.taken(taker(300), { ...grant, serverMs: serverNow() })!.ttl).toBe(300);
  });

  it('leaves to the claim a grant it cannot bound', async () => {
    // Nothing measured yet.
    const fresh = HoldAtOnce.of([node], leases)!;
    expect(fresh.taken(taker(), { fence: 1, spare: 0, serverMs: serverNow() })).toBeUndefined();
    const policy = await measured();
    // No server time in the message.
    expect(policy.taken(taker(), { fence: 1, spare: 0 })).toBeUndefined();
    // Replicas must acknowledge the hold.
    const acks = { replicas: 1, timeout: 100 };
    expect(policy.taken(taker(30_000, acks), { fence: 1, spare: 0, serverMs: serverNow() })).toBe(
      undefined,
    );
    // Read late: less than half of the window surely ahead.
    const late = serverNow() - GRANT_CLAIM_MS * 0.6;
    expect(policy.taken(taker(), { fence: 1, spare: 0, serverMs: late })).toBeUndefined();
  });
});

describe('HoldFromReleaseAnswer', () => {
  const grant = (token: string, fence: number) => ({ token, fence, spare: 0, writerBehind: false });

  it('hands each grant of the answer to its shared grantee or its waiter of a single key', () => {
    const shared: [number, number][] = [];
    const waiters: [string, number, number][] = [];
    const grantee: SharedGrantee = {
      message: () => undefined,
      answered: (fence, sentAt) => shared.push([fence, sentAt]),
    };
    const policy = new HoldFromReleaseAnswer({
      shared: (token) => (token === 's.1' ? grantee : undefined),
      waiter: (key, token) =>
        token === 'w.1'
          ? { answered: (g, sentAt) => waiters.push([`${key} ${token}`, g.fence, sentAt]) }
          : undefined,
    });
    policy.answered(['k'], [grant('s.1', 4), grant('w.1', 5), grant('gone', 6)], 123);
    expect(shared).toEqual([[4, 123]]);
    expect(waiters).toEqual([['k w.1', 5, 123]]);
    // A release of several keys does not say which key went to which waiter: none is handed.
    policy.answered(['a', 'b'], [grant('w.1', 9)], 456);
    expect(waiters).toHaveLength(1);
  });
});

describe('claimBeside', () => {
  const windowLease = (ttl: number) =>
    new Lease(['k'], 't.1', [1], 0, ttl, false, Infinity, Date.now(), 0);
  const taken = (claimNow?: boolean): Taken => ({
    kind: 'ok',
    fences: [1],
    start: 0,
    spare: 0,
    uncontended: false,
    ttl: GRANT_CLAIM_MS,
    claimNow,
  });

  afterEach(() => jest.useRealTimers());

  it('claims nothing for a lease that is full already (a grant claimed the plain way)', () => {
    const claim = jest.fn(() => Promise.resolve(true));
    claimBeside(windowLease(30_000), 30_000, taken(), claim);
    expect(claim).not.toHaveBeenCalled();
  });

  it('claims at once a grant held at once', () => {
    const claim = jest.fn(() => Promise.resolve(true));
    claimBeside(windowLease(GRANT_CLAIM_MS), 30_000, taken(true), claim);
    expect(claim).toHaveBeenCalledTimes(1);
  });

  it('claims a grant held from a release answer a third into its window, if still held', () => {
    jest.useFakeTimers({ doNotFake: ['performance'] });
    const claim = jest.fn(() => Promise.resolve(true));
    const held = windowLease(GRANT_CLAIM_MS);
    const released = windowLease(GRANT_CLAIM_MS);
    claimBeside(held, 30_000, taken(), claim);
    claimBeside(released, 30_000, taken(), claim);
    released.released = true;
    jest.advanceTimersByTime(GRANT_CLAIM_MS / 3 - 1);
    expect(claim).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(claim).toHaveBeenCalledTimes(1);
  });
});
