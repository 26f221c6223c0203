import type { HistoryEvent, HistoryFault, HistoryProcess, Hold } from './history.types';

/** One call's steps, gathered. */
interface CallSteps {
  process: HistoryProcess;
  call: string | number;
  key: string;
  invokedAt?: number;
  okAt?: number;
  failedAt?: number;
  fence?: number;
  lostAt?: number;
  releaseInvokedAt?: number;
  releasedAt?: number;
}

/** The holds of a history, the waits of every call, and the events that fit no call. */
export interface CallsOfHistory {
  readonly holds: Hold[];
  /** `[acquire-invoke, acquire-ok or acquire-fail]` of every call, per key. */
  readonly waits: { key: string; from: number; to: number }[];
  readonly acquireFailures: number;
  readonly malformed: HistoryEvent[];
}

/**
 * Pairs the steps of each call (by process and call id) into holds. A hold's section ends at its
 * `release-invoke`; without one, when its process was killed (a `process-killed` fault), or else
 * at `end`. A `lost` step counts only before the section ended.
 */
export function holdsOf(
  events: readonly HistoryEvent[],
  faults: readonly HistoryFault[],
  end: number,
): CallsOfHistory {
  const calls = new Map<string, CallSteps>();
  const malformed: HistoryEvent[] = [];
  for (const e of [...events].sort((a, b) => a.at - b.at)) {
    const id = `${e.process}\u0000${e.call}`;
    let c = calls.get(id);
    if (!c) {
      c = { process: e.process, call: e.call, key: e.key };
      calls.set(id, c);
    }
    if (!record(c, e)) malformed.push(e);
  }
  const holds: Hold[] = [];
  const waits: CallsOfHistory['waits'] = [];
  let acquireFailures = 0;
  for (const c of calls.values()) {
    if (c.invokedAt === undefined) continue;
    const settled = c.okAt ?? c.failedAt ?? killedAt(faults, c.process, c.invokedAt) ?? end;
    waits.push({ key: c.key, from: c.invokedAt, to: settled });
    if (c.failedAt !== undefined) acquireFailures++;
    if (c.okAt === undefined) continue;
    const sectionEnd = c.releaseInvokedAt ?? killedAt(faults, c.process, c.okAt) ?? end;
    holds.push({
      process: c.process,
      call: c.call,
      key: c.key,
      fence: c.fence,
      invokedAt: c.invokedAt,
      start: c.okAt,
      end: sectionEnd,
      releasedAt: c.releasedAt ?? sectionEnd,
      lostAt: c.lostAt !== undefined && c.lostAt <= sectionEnd ? c.lostAt : undefined,
    });
  }
  return { holds, waits, acquireFailures, malformed };
}

/** Records one step on its call; false when it does not fit (out of order, repeated). */
function record(c: CallSteps, e: HistoryEvent): boolean {
  switch (e.step) {
    case 'acquire-invoke':
      if (c.invokedAt !== undefined) return false;
      c.invokedAt = e.at;
      return true;
    case 'acquire-ok':
      if (c.invokedAt === undefined || c.okAt !== undefined || c.failedAt !== undefined)
        return false;
      c.okAt = e.at;
      c.fence = e.fence;
      return true;
    case 'acquire-fail':
      if (c.invokedAt === undefined || c.okAt !== undefined || c.failedAt !== undefined)
        return false;
      c.failedAt = e.at;
      return true;
    case 'lost':
      if (c.okAt === undefined) return false;
      c.lostAt ??= e.at;
      return true;
    case 'release-invoke':
      if (c.okAt === undefined || c.releaseInvokedAt !== undefined) return false;
      c.releaseInvokedAt = e.at;
      return true;
    case 'release-ok':
      if (c.releaseInvokedAt === undefined || c.releasedAt !== undefined) return false;
      c.releasedAt = e.at;
      return true;
  }
}

/** When `process` was killed after `after`, if it was. */
function killedAt(
  faults: readonly HistoryFault[],
  process: HistoryProcess,
  after: number,
): number | undefined {
  let at: number | undefined;
  for (const f of faults) {
    if (f.kind === 'process-killed' && f.process === process && f.from >= after)
      at = Math.min(at ?? Infinity, f.from);
  }
  return at;
}
