import { performance } from 'node:perf_hooks';
import { LockBackendError, LockNotAcquiredError } from '../errors';
import type { Outcome, Taken } from './protocol/lock-protocol';
import type { RedisTaker, RedisLease } from './redis-lease';
import { abortReason, FRESH_ANSWER_MS, outageRetryDelay, retryDelay } from '../core/wait-rules';
import { WakeLatch } from './wake-latch';

/** A subscription to the release channels of some keys. */
export interface ReleaseWatch {
  /** Settles once subscribed, or soon (never rejects): without it the waiter polls. */
  readonly ready: Promise<void>;
  stop(): void;
}

/**
 * What a queued shared wait is given: a grant message for its own token, a hold once the wait
 * confirmed it (`claim`: undefined when the key was lost meanwhile), or a permit a holder of this
 * process passed on to it (the holder's token, not the waiter's).
 * @internal
 */
export type Granted =
  | { readonly kind: 'grant'; claim(): Promise<Taken | undefined> }
  | { readonly kind: 'handed'; readonly lease: RedisLease };

/** What a multi-key wait needs from the engine. @internal */
export interface MultiKeyWaitContext {
  readonly closing: AbortSignal;
  attempt(keys: readonly string[], taker: RedisTaker, waitMs: number): Promise<Outcome>;
  hold(keys: readonly string[], taker: RedisTaker, taken: Taken): RedisLease;
  /** Calls `onRelease` at each release of any of `keys`. */
  watch(keys: readonly string[], onRelease: () => void): ReleaseWatch;
  abandon(keys: readonly string[], token: string): void;
  timerWakeup(): void;
  /**
   * Shared holds queued for a grant: `deliver` gets what a release granted to `token` (claimed
   * by the wait), or a permit passed on in this process; `attempting` tells whether a round of
   * the wait (an attempt, a claim) is on its way. Returns the function that stops listening.
   */
  grants?(
    token: string,
    deliver: (granted: Granted) => void,
    attempting: () => boolean,
  ): () => void;
  /** A permit passed to a wait that ended meanwhile (aborted, closed): it goes on or back. */
  unusedShare?(lease: RedisLease): void;
}

/**
 * Several keys at once, or a shared hold (read lock or permit): no local line (several keys are
 * taken all or nothing, in one script; shared holders do not exclude each other); the caller
 * races, retrying at each release of any of its keys, or when the busy holder's lease runs out,
 * and through a backend blip until its deadline (which then rejects with the backend error). A
 * shared hold queued in Redis (single node, one key) is granted by the release instead
 * (`ctx.grants`).
 * @internal
 */
export async function waitForKeys(
  ctx: MultiKeyWaitContext,
  keys: readonly string[],
  taker: RedisTaker,
  deadline: number,
  signal: AbortSignal | undefined,
): Promise<RedisLease> {
  const latch = new WakeLatch();
  let granted: Granted | undefined;
  let done = false;
  let held = false;
  let inFlight = false;
  const giveBack = (given: Granted): void => {
    if (given.kind === 'handed') ctx.unusedShare?.(given.lease);
    else ctx.abandon(keys, taker.token);
  };
  const unlisten = ctx.grants?.(
    taker.token,
    (given) => {
      // Granted after the wait gave up: nobody will use it, so it goes on at once.
      if (done || held) return giveBack(given);
      granted = given;
      latch.wake();
    },
    () => inFlight,
  );
  const hold = (taken: Taken): RedisLease => {
    held = true;
    return ctx.hold(keys, taker, taken);
  };
  const handed = (lease: RedisLease): RedisLease => {
    held = true;
    return lease;
  };
  const watch = ctx.watch(keys, () => latch.wake());
  const stop = () => latch.wake();
  signal?.addEventListener('abort', stop);
  ctx.closing.addEventListener('abort', stop);
  let attempted = false;
  try {
    await watch.ready;
    let pttl = taker.ttl;
    let idleRounds = 0;
    let outage: LockBackendError | undefined;
    let failures = 0;
    let answeredAt = -Infinity;
    for (;;) {
      if (signal?.aborted || ctx.closing.aborted) throw abortReason(keys, signal);
      if (granted?.kind === 'handed') return handed(granted.lease);
      if (granted) {
        // A grant message: claimed here, never while an attempt of the token is on its way (one
        // round at a time per token: a failed attempt's undo would land after the claim and
        // give back the share it confirmed).
        const { claim } = granted;
        granted = undefined;
        attempted = true;
        inFlight = true;
        const claimed = await claim().catch(() => undefined);
        inFlight = false;
        if (signal?.aborted || ctx.closing.aborted) throw abortReason(keys, signal);
        // A permit passed meanwhile wins: it gave this token's share back (`PermitWait.take`).
        if (granted) continue;
        if (claimed) return hold(claimed);
        // The claim window ran out before the grant was read, and someone else has the key.
        continue;
      }
      const remaining = deadline - performance.now();
      // Past the deadline, Redis has the last word unless it answered moments ago (see Waiter).
      const last = remaining <= 0;
      if (last && (outage || performance.now() - answeredAt < FRESH_ANSWER_MS)) break;
      attempted = true;
      let outcome: Outcome;
      try {
        inFlight = true;
        outcome = await ctx.attempt(keys, taker, last ? 0 : remaining);
      } catch (err) {
        if (last || !(err instanceof LockBackendError) || ctx.closing.aborted) throw err;
        // A blip: keep waiting through it (see Waiter).
        outage = err;
        await latch.sleep(outageRetryDelay(++failures, deadline));
        continue;
      } finally {
        inFlight = false;
      }
      outage = undefined;
      failures = 0;
      answeredAt = performance.now();
      if (outcome.kind === 'ok') {
        attempted = false;
        if (signal?.aborted || ctx.closing.aborted) {
          ctx.abandon(keys, taker.token);
          throw abortReason(keys, signal);
        }
        // A grant that came meanwhile is the same hold (same token), renewed by this attempt:
        // it needs no claim. A permit passed meanwhile wins: this attempt's share was given back
        // by the pass (sent after it, on the same connection).
        const given = granted as Granted | undefined; // set meanwhile, by `deliver`
        if (given?.kind === 'handed') return handed(given.lease);
        granted = undefined;
        return hold(outcome);
      }
      if (granted) continue;
      pttl = outcome.pttl;
      if (last || deadline - performance.now() <= 0) break;
      idleRounds = pttl > 0 ? 0 : idleRounds + 1;
      const delay = retryDelay(pttl, deadline, idleRounds);
      if ((await latch.sleep(delay)) === 'timer') ctx.timerWakeup();
    }
    throw outage ?? new LockNotAcquiredError(keys, performance.now() - taker.startedAt, pttl);
  } catch (err) {
    // A racing caller flagged its keys but queued nothing: only an attempt that may have
    // landed needs undoing.
    if (attempted) ctx.abandon(keys, taker.token);
    throw err;
  } finally {
    done = true;
    // Given a hold but ending without it (aborted, closed): it must not stay taken.
    if (granted && !held) giveBack(granted);
    unlisten?.();
    signal?.removeEventListener('abort', stop);
    ctx.closing.removeEventListener('abort', stop);
    latch.wake();
    watch.stop();
  }
}
