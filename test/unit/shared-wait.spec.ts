import { LockBackendError } from '../../lib/errors';
import { RedisLease, type RedisTaker } from '../../lib/redis/redis-lease';
import type { MultiKeyWaitContext } from '../../lib/redis/multi-key-wait';
import { waitForKeys } from '../../lib/redis/multi-key-wait';
import {
  type SharedGrantee,
  SharedWait,
  type SharedWaitEngine,
  type SharedWaitOwner,
} from '../../lib/redis/shared-wait';
import type { SharedOutcome, Taken } from '../../lib/redis/protocol/lock-protocol';

/**
 * A shared wait queued in Redis (single node, one key) has one round at a time for its token,
 * as a wait in a key line has: a grant message that comes while its attempt is on the way is
 * claimed once that attempt answered. A failed attempt's undo (sent when it fails) would
 * otherwise land after a claim of the same token sent meanwhile, and give back the share the
 * claim confirmed (issue 34, the audit of the local handoff's race).
 */

/** A promise settled from outside. */
function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const flush = () => new Promise<void>((r) => setImmediate(r));

const taken: Taken = { kind: 'ok', fences: [7], start: 0, spare: 0, uncontended: false };

/** An engine whose rounds answer when the test says, each start and end recorded in `log`. */
function fakes() {
  const log: string[] = [];
  const attempts: ReturnType<typeof deferred<SharedOutcome>>[] = [];
  const claims: ReturnType<typeof deferred<Taken | undefined>>[] = [];
  let grantee: SharedGrantee | undefined;
  const round = <T>(name: string, list: ReturnType<typeof deferred<T>>[]): Promise<T> => {
    log.push(`${name} sent`);
    const d = deferred<T>();
    list.push(d);
    return d.promise.finally(() => log.push(`${name} answered`));
  };
  const closing = new AbortController().signal;
  const engine: SharedWaitEngine = {
    protocol: {
      attemptShared: () => round('attempt', attempts),
      abandon: (_keys, token) => log.push(`undo ${token}`),
    },
    tokens: { drop: () => undefined },
    localHandoffs: 0,
    keysWait: { closing, timerWakeup: () => undefined } as unknown as MultiKeyWaitContext,
    listenForGrants: () => ({ ready: Promise.resolve(), stop: () => undefined }),
    claim: () => round('claim', claims),
    release: () => Promise.resolve(),
  };
  const owner: SharedWaitOwner = {
    hold: (keys, taker, t) =>
      new RedisLease(keys, taker.token, t.fences, 0, taker.ttl, false, Infinity, 0),
    expectGrant: (_token, g) => (grantee = g),
    grantEnded: () => undefined,
    permitWaitStarted: () => undefined,
    started: () => undefined,
  };
  return { log, attempts, claims, engine, owner, grantee: () => grantee! };
}

describe('a shared wait queued in Redis', () => {
  it('claims a grant that came during its attempt only once the attempt answered', async () => {
    const f = fakes();
    const taker: RedisTaker = { token: 'p.1', ttl: 1_000, startedAt: performance.now() };
    const ctx = new SharedWait(f.owner, f.engine, ['k'], 2, taker, true);
    const lease = waitForKeys(ctx, ['k'], taker, performance.now() + 60_000, undefined);
    await flush();
    expect(f.log).toEqual(['attempt sent']);
    // A release granted the token a permit; its message comes while the attempt is out.
    f.grantee().message({ key: 'k', token: 'p.1', fence: 7, spare: 0 });
    await flush();
    expect(f.log).toEqual(['attempt sent']);
    // The attempt fails (its node timed out): its undo goes, then the grant is claimed.
    f.attempts[0].reject(new LockBackendError(['k'], [new Error('timed out')]));
    await flush();
    f.claims[0]?.resolve(taken);
    await expect(lease).resolves.toMatchObject({ token: 'p.1', fences: [7] });
    expect(f.log.slice(0, 3)).toEqual(['attempt sent', 'attempt answered', 'claim sent']);
  });
});
