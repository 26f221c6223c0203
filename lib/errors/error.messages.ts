import { quotedList } from '../redlock.messages';

/** The messages of the public lock errors (`errors/`), one factory each. */

export const LOCK_NOT_ACQUIRED = (keys: readonly string[], waitedMs: number) =>
  `Lock ${quotedList(keys)} is held by another caller; gave up after waiting ${Math.round(waitedMs)} ms ` +
  `(waitTimeout). Retry later, or raise waitTimeout for this call.`;

export const LOCK_BACKEND_FAILED = (
  keys: readonly string[],
  op: string,
  failures: readonly Error[],
  system = 'Redis',
) =>
  `Could not ${op} lock ${quotedList(keys)}: ${system} failed (${failures
    .map((f) => f.message)
    .slice(0, 3)
    .join('; ')}). Check that the lock servers are reachable.`;

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
