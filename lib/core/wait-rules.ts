import { performance } from 'node:perf_hooks';
import { LockBackendError } from '../errors';
import { SHUTTING_DOWN } from './core.messages';

/** At a waiter's deadline, an answer from Redis this recent still tells the truth. */
export const FRESH_ANSWER_MS = 5;

/** The longest a waiter sleeps between two tries (a lost notification costs at most this). */
export const MAX_POLL_MS = 1_000;

/**
 * How long a waiter that found the key busy sleeps before trying again, unless a release wakes
 * it first. Expiry publishes nothing, so it tries again when the holder's lease runs out. A key
 * with no lease (`pttl` -1: written without an expiry by another tool) or found free but not
 * taken (a quorum split) is retried with a doubling back-off (`rounds`: such answers in a row).
 * @internal
 */
export function retryDelay(pttl: number, deadline: number, rounds: number): number {
  const untilFree = pttl > 0 ? pttl + 1 : 2 ** Math.min(rounds, 10);
  return Math.max(1, Math.min(untilFree, MAX_POLL_MS, deadline - performance.now()));
}

/**
 * How long a waiter whose attempt failed on the backend (the `failures`-th time in a row) waits
 * before trying again: 50 ms doubling to 1 s, never past the deadline.
 * @internal
 */
export function outageRetryDelay(failures: number, deadline: number): number {
  const backoff = Math.min(MAX_POLL_MS, 25 * 2 ** Math.min(failures, 6));
  return Math.max(1, Math.min(backoff, deadline - performance.now()));
}

/** Why a wait ends early: the caller's signal, or the client closing (shutdown). @internal */
export function abortReason(keys: readonly string[], signal?: AbortSignal): unknown {
  if (signal?.aborted) return signal.reason;
  return new LockBackendError(keys, [new Error(SHUTTING_DOWN)], 'acquire');
}

/**
 * The prologue of every acquire: a closed backend starts no wait (the shutdown's error), and an
 * aborted signal ends the call before it starts (with its reason).
 * @internal
 */
export function refuseToStart(
  keys: readonly string[],
  closed: boolean,
  signal: AbortSignal | undefined,
): void {
  if (closed) throw abortReason(keys);
  if (signal?.aborted) throw signal.reason;
}
