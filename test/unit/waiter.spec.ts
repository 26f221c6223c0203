import { setTimeout as sleep } from 'node:timers/promises';
import { LockNotAcquiredError } from '../../lib/errors';
import { KeyLine } from '../../lib/redis/key-line';
import { RedisLease, type RedisTaker } from '../../lib/redis/redis-lease';
import { type GrantedKey, type LineWaitContext, Waiter } from '../../lib/redis/waiter';
import type { Outcome, Taken } from '../../lib/redis/protocol/lock-protocol';

/**
 * A waiter behind its line's head keeps no loop of its own until something nudges it (a long
 * line holds no suspended loop per waiter). These tests pin what such a waiter must still do:
 * only the head goes to Redis; a grant, its deadline or its signal each end its wait; and the
 * next head starts trying once the head leaves.
 */

/** A context whose Redis is a script of answers: every attempt is recorded and stays busy. */
class FakeContext implements LineWaitContext {
  readonly fair = true;
  readonly closing = new AbortController().signal;
  readonly attempts: string[] = [];
  readonly claims: string[] = [];
  readonly abandoned: string[] = [];
  /** What a claim answers (undefined: the key went to someone else). */
  claimAnswer: Taken | undefined;
  private leases = 0;

  attempt(_keys: readonly string[], taker: RedisTaker): Promise<Outcome> {
    this.attempts.push(taker.token);
    // Busy, with a holder whose lease runs a while: the head sleeps until nudged.
    return Promise.resolve({ kind: 'busy', pttl: 10_000 } as Outcome);
  }

  hold(keys: readonly string[], taker: RedisTaker, taken: Taken): RedisLease {
    this.leases++;
    return new RedisLease(keys, taker.token, taken.fences, 0, taker.ttl, false, Infinity, 0);
  }

  listen(): Promise<void> {
    return Promise.resolve();
  }

  holds(): boolean {
    return false;
  }

  undoing(): boolean {
    return false;
  }

  abandon(_keys: readonly string[], token: string): void {
    this.abandoned.push(token);
  }

  dropIfIdle(): void {}

  timerWakeup(): void {}

  claim(_keys: readonly string[], taker: RedisTaker): Promise<Taken | undefined> {
    this.claims.push(taker.token);
    return Promise.resolve(this.claimAnswer);
  }
}

const taken = (fence: number): Taken =>
  ({ kind: 'ok', fences: [fence], start: 0, spare: 0 }) as unknown as Taken;

function taker(token: string): RedisTaker {
  return { token, ttl: 1_000, startedAt: performance.now() };
}

/** A line of `n` waiters on key k (the first the head), waiting 60 s unless `waitMs` says. */
function lineOf(ctx: FakeContext, n: number, waitMs: number[] = [], signals: AbortSignal[] = []) {
  const line = new KeyLine<Waiter>('k');
  const waiters = Array.from({ length: n }, (_, i) => {
    const deadline = performance.now() + (waitMs[i] ?? 60_000);
    return new Waiter(ctx, line, ['k'], taker(`p.${i}`), deadline, signals[i], false);
  });
  // Each test looks at the leases it cares about; the rest end with the cleanup's abort.
  for (const w of waiters) w.lease.catch(() => undefined);
  return { line, waiters };
}

const settle = () => sleep(5);

describe('a waiter behind the head (no loop until nudged)', () => {
  let ctx: FakeContext;
  let cleanup: Waiter[] = [];

  beforeEach(() => {
    ctx = new FakeContext();
    cleanup = [];
  });

  afterEach(() => {
    for (const w of cleanup) w.abort();
  });

  it('only the head goes to Redis, however long the line', async () => {
    const { waiters } = lineOf(ctx, 50);
    cleanup = waiters;
    await settle();
    expect(ctx.attempts).toEqual(['p.0']);
  });

  it('takes a grant for its token: claims it and holds', async () => {
    const { waiters } = lineOf(ctx, 3);
    cleanup = waiters;
    ctx.claimAnswer = taken(7);
    const grant: GrantedKey = { fence: 7, spare: 0 };
    expect(waiters[2].granted(grant)).toBe(true);
    const lease = await waiters[2].lease;
    expect(lease.token).toBe('p.2');
    expect(ctx.claims).toEqual(['p.2']);
    // It left the line; the others still wait.
    expect(waiters[2].done).toBe(true);
    expect(waiters[1].done).toBe(false);
  });

  it('ends at its deadline with LockNotAcquiredError, never having tried', async () => {
    const { waiters } = lineOf(ctx, 3, [60_000, 60_000, 30]);
    cleanup = waiters;
    const outcome = await waiters[2].lease.then(
      () => 'held',
      (err: unknown) => err,
    );
    expect(outcome).toBeInstanceOf(LockNotAcquiredError);
    // Behind the head, its end needs no word from Redis, and it never queued there.
    expect(ctx.attempts).toEqual(['p.0']);
    expect(ctx.abandoned).not.toContain('p.2');
    expect(waiters[1].done).toBe(false);
  });

  it('ends when its signal aborts', async () => {
    const abort = new AbortController();
    const { waiters } = lineOf(ctx, 3, [], [undefined!, undefined!, abort.signal]);
    cleanup = waiters;
    const reason = new Error('caller gave up');
    abort.abort(reason);
    await expect(waiters[2].lease).rejects.toBe(reason);
    expect(waiters[2].done).toBe(true);
  });

  it('starts trying once it becomes the head', async () => {
    const { line, waiters } = lineOf(ctx, 3);
    cleanup = waiters;
    await settle();
    expect(ctx.attempts).toEqual(['p.0']);
    waiters[0].abort();
    expect(line.head).toBe(waiters[1]);
    await settle();
    expect(ctx.attempts).toEqual(['p.0', 'p.1']);
  });
});
