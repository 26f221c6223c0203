import { fenceViolations } from './fences';
import type { HistoryInput, HistoryReport } from './history.types';
import { holdsOf } from './holds';
import { findOverlaps } from './overlaps';
import { staleWritesAccepted } from './stale-writes';
import { longestUnavailability } from './unavailability';

/**
 * Checks a history of lock calls: every overlapping pair of holds of a key with its class
 * (explained by a fault, or a second holder within a valid lease), fences unique and rising in
 * real-time order, stale writes a fenced store accepted, increments the unfenced counter lost,
 * and the longest time a key had waiters and no holder. It knows nothing of the library: a bug
 * in the lock cannot hide in the check. docs/histories.md says what each class means.
 *
 * @example
 * const report = checkHistory({ events, faults, writes, lease: 1_000 });
 * if (report.unexplained.length > 0 || report.fenceViolations.length > 0) process.exitCode = 1;
 */
export function checkHistory(input: HistoryInput): HistoryReport {
  const faults = input.faults ?? [];
  // A loop, not Math.max(...): a long history has more events than a call takes arguments.
  const end = input.end ?? input.events.reduce((max, e) => Math.max(max, e.at), -Infinity);
  const { holds, waits, acquireFailures, malformed } = holdsOf(input.events, faults, end);
  const renewEvery = input.renewEvery ?? (Number.isFinite(input.lease) ? input.lease / 3 : 0);
  const overlaps = findOverlaps(holds, faults, { lease: input.lease, renewEvery });
  const unexplained = overlaps.filter((o) => o.class === 'second-holder-within-valid-lease');
  const writes = input.writes ?? [];
  const accepted = writes.filter((w) => w.accepted).length;
  return {
    holds: holds.length,
    acquireFailures,
    holdsLost: holds.filter((h) => h.lostAt !== undefined).length,
    overlaps,
    explained: overlaps.length - unexplained.length,
    unexplained,
    fenceViolations: fenceViolations(holds, faults),
    writesAccepted: accepted,
    writesRefused: writes.length - accepted,
    staleWritesAccepted: staleWritesAccepted(writes, holds),
    lostIncrements: input.counter && input.counter.increments - input.counter.value,
    longestUnavailability: longestUnavailability(holds, waits),
    malformed,
  };
}
