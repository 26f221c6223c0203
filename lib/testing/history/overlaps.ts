import type { HistoryFault, Hold, Overlap, OverlapClass } from './history.types';

/** What decides whether a fault explains an overlap. */
export interface LeaseRules {
  /** How long the server keeps a silent holder's key (ttl, session lease, Infinity). */
  readonly lease: number;
  readonly renewEvery: number;
}

/**
 * Every pair of holds of one key whose sections overlap (the second starts before the first
 * ended; touching ends do not count), each with its class.
 */
export function findOverlaps(
  holds: readonly Hold[],
  faults: readonly HistoryFault[],
  rules: LeaseRules,
): Overlap[] {
  const frozen = frozenSpans(faults);
  const overlaps: Overlap[] = [];
  for (const list of byKey(holds).values()) {
    const sorted = [...list].sort((a, b) => a.start - b.start || a.end - b.end);
    const open: Hold[] = [];
    for (const second of sorted) {
      for (let i = open.length - 1; i >= 0; i--) if (open[i].end <= second.start) open.splice(i, 1);
      for (const first of open) {
        const { cls, fault } = classify(first, second, faults, frozen, rules);
        overlaps.push({
          key: second.key,
          first,
          second,
          from: second.start,
          to: Math.min(first.end, second.end),
          class: cls,
          fault,
        });
      }
      open.push(second);
    }
  }
  return overlaps;
}

/** Groups holds (or any records of a key) by key, in their order. */
export function byKey<T extends { readonly key: string }>(items: readonly T[]): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const list = out.get(item.key);
    if (list) list.push(item);
    else out.set(item.key, [item]);
  }
  return out;
}

/**
 * Why `second` could start while `first` still ran. A fault explains it only if it could have
 * ended `first`'s lease before `second` started:
 * - `holder-frozen`: `first`'s process was frozen (during its hold, before `second` started)
 *   for at least `lease - renewEvery` (the least a live holder's lease has left), and `second`
 *   started at least that long after the freeze began; only the freeze after `first` asked
 *   counts (its lease cannot have started before), and back-to-back freezes count as one
 *   (`frozenSpans`);
 * - `session-killed`: the session of `first` (or of every holder) was ended between its
 *   acquire and `second`'s start, while its section ran (a kill spanning `[from, to]` counts
 *   if any of it falls there); or the session of `second` was ended between its acquire's
 *   invoke and its start: the server granted `second` (a lower fence) and ended it before its
 *   holder saw the grant (its process frozen), and the holder learns of the loss after;
 * - `server-forgot`: a server that forgets its locks went down between `first`'s acquire and
 *   `second`'s start, while `first`'s section ran.
 * Otherwise, `lease-ended` if `first` had been told its lease was gone before `second` started,
 * and a second holder within a valid lease if not.
 */
function classify(
  first: Hold,
  second: Hold,
  faults: readonly HistoryFault[],
  frozen: readonly FrozenSpan[],
  { lease, renewEvery }: LeaseRules,
): { cls: OverlapClass; fault?: HistoryFault } {
  const lapse = lease - renewEvery;
  for (const f of frozen) {
    // The lease starts when its acquire is sent, after the call asked: a freeze before that
    // took nothing from it.
    const from = Math.max(f.from, first.invokedAt);
    if (
      f.process === first.process &&
      from < first.end &&
      f.to > first.start &&
      f.to - from >= lapse &&
      second.start - from >= lapse
    )
      return { cls: 'holder-frozen', fault: f };
  }
  // A kill that takes a while (several sessions) counts from its first to its last moment.
  const during = (f: HistoryFault) =>
    f.to >= first.invokedAt && f.from < first.end && f.from <= second.start;
  // A kill after `second` asked and before it saw its grant, with `second`'s fence the lower:
  // the server granted it first and ended it before `first` was granted.
  const beforeSeen = (f: HistoryFault) =>
    f.to >= second.invokedAt &&
    f.from <= second.start &&
    second.fence !== undefined &&
    first.fence !== undefined &&
    second.fence < first.fence;
  for (const f of faults) {
    switch (f.kind) {
      case 'session-killed':
        if ((f.process === undefined || f.process === first.process) && during(f))
          return { cls: 'session-killed', fault: f };
        if ((f.process === undefined || f.process === second.process) && beforeSeen(f))
          return { cls: 'session-killed', fault: f };
        break;
      case 'server-restarted':
        if (f.forgetsLocks && during(f)) return { cls: 'server-forgot', fault: f };
        break;
      default:
        break;
    }
  }
  if (first.lostAt !== undefined && first.lostAt <= second.start) return { cls: 'lease-ended' };
  return { cls: 'second-holder-within-valid-lease' };
}

type FrozenSpan = Extract<HistoryFault, { kind: 'process-frozen' }>;

/**
 * The freezes of each process, those that overlap or touch joined into one. A measured pause
 * ends at the event-loop turn where the next one starts: pauses end to end are a process whose
 * loop turned once between them, which is a process that could not run (a lease needs its
 * holder's timers and the answers to its renewals, more than one turn), and a SIGSTOP inside a
 * measured pause is the same freeze, not a second one.
 */
function frozenSpans(faults: readonly HistoryFault[]): FrozenSpan[] {
  const spans = faults
    .filter((f): f is FrozenSpan => f.kind === 'process-frozen')
    .sort((a, b) => String(a.process).localeCompare(String(b.process)) || a.from - b.from);
  const out: FrozenSpan[] = [];
  for (const f of spans) {
    const last = out.at(-1);
    if (last && last.process === f.process && f.from <= last.to)
      out[out.length - 1] = { ...last, to: Math.max(last.to, f.to), source: joined(last, f) };
    else out.push(f);
  }
  return out;
}

/** The sources of two joined freezes, each named once ('measured', 'holder-frozen-brief'...). */
function joined(a: FrozenSpan, b: FrozenSpan): string | undefined {
  const names = new Set([...(a.source ?? '').split('+'), ...(b.source ?? '').split('+')]);
  names.delete('');
  return names.size > 0 ? [...names].join('+') : undefined;
}
