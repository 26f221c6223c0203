import { quotedList } from '../redlock.messages';

/** The messages of the public lock errors (`errors/`), one factory each. */

export const LOCK_NOT_ACQUIRED = (keys: readonly string[], waitedMs: number) =>
  `Lock ${quotedList(keys)} is held by another caller; gave up after waiting ${Math.round(waitedMs)} ms ` +
  `(waitTimeout). Retry later, or raise waitTimeout for this call.`;

/** What to check, by the kind of cause of a backend failure (see `failureHint`). */
export const FAILURE_HINTS = {
  auth: 'Check the user and password of the lock backend (its options or URL).',
  database:
    'Create the database (and grant it to the lock user), or fix the database name of the lock backend.',
  refused: 'Check that the lock server is running and listening at that address.',
  host: 'Check the host name of the lock backend.',
  timeout: 'Check that the lock server is not stalled or overloaded, or raise commandTimeout.',
  unknown: 'Check that the lock servers are reachable.',
} as const;

/**
 * `hint`: what to check, picked from the cause (`failureHint`). It ends the message once, after
 * the failures' words (a failure described by its backend ends with it: moved out).
 */
export const LOCK_BACKEND_FAILED = (
  keys: readonly string[],
  op: string,
  failures: readonly Error[],
  system: string,
  hint: string,
) => {
  const causes = failures
    .slice(0, 3)
    .map((f) => f.message.replace(` ${hint}`, '').replace(/\.$/, ''))
    .join('; ');
  return `Could not ${op} lock ${quotedList(keys)}: ${system} failed (${causes}). ${hint}`;
};

export const LOCK_LOST = (keys: readonly string[], reason: string) => {
  switch (reason) {
    case 'maxHold':
      return `Lock ${quotedList(keys)} reached maxHold and is no longer renewed; stop acting on it.`;
    case 'expired':
      return `Lock ${quotedList(keys)} expired: renewals failed until the lease ran out; another caller may hold it now.`;
    case 'shutdown':
      return `Lock ${quotedList(keys)} was released because the application is shutting down.`;
    default:
      return `Lock ${quotedList(keys)} was lost: a renewal found it gone or owned by another holder.`;
  }
};

export const ALL_SEGMENTS_EXHAUSTED = (keys: readonly string[], segments: number) =>
  `No segment of ${quotedList(keys)} can serve the call: all ${segments} slices are exhausted. ` +
  `Replenish them (LockService.resetSegments makes them usable at once).`;

export const LOCK_ORDER_REFUSED = (keys: readonly string[], report: string) =>
  `Lock ${quotedList(keys)} was not taken (lockOrder: 'throw'): taking it here closes a cycle of ` +
  `lock orders that can deadlock.\n${report}`;

export const SERVER_DEADLOCK = (keys: readonly string[], report: string) =>
  `Lock ${quotedList(keys)}: the database server found a deadlock and chose this call as its ` +
  `victim. Take these locks in one order everywhere, or in one multi-key call.\n${report}`;
