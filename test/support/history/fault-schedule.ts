import { mulberry32 } from '../../../bench/seeded';

/** The faults a history run can inject (which ones a backend takes: `HistoryTarget.kinds`). */
export const PLANNED_FAULT_KINDS = [
  /** A holder's process SIGSTOPped past its lease, then SIGCONT. */
  'holder-frozen-long',
  /** A holder's process SIGSTOPped for well under its lease (it must keep its lock). */
  'holder-frozen-brief',
  /** A holder's process SIGKILLed (a fresh worker takes its place). */
  'holder-killed',
  /** The server, or one node or member (the leader on etcd and ZooKeeper), SIGSTOPped. */
  'server-frozen',
  /** The server, or one node or member, SIGKILLed and started again. */
  'server-restarted',
  /** The holder's session ended on the server (`pg_terminate_backend`, `KILL`, lease revoked). */
  'session-killed',
  /** The lock connections cut on the server (Redis `CLIENT KILL`: no session to lose). */
  'connection-killed',
] as const;

export type PlannedFaultKind = (typeof PLANNED_FAULT_KINDS)[number];

export interface PlannedFault {
  readonly kind: PlannedFaultKind;
  /** Ms after the start of the run. */
  readonly at: number;
  /** How long a freeze lasts (0 for the others). */
  readonly ms: number;
  /** A draw in [0, 1) that picks the holder, node or member the fault hits. */
  readonly pick: number;
}

/**
 * The faults of a run of `durationMs` under `seed`: every kind of `kinds` once, in a seeded
 * order, then seeded draws of them until the time is up; each after a seeded pause of half a
 * lease to a lease, so the locks recover in between. A long freeze lasts 1.3-1.8 leases, a brief
 * one 5-25% of a lease (less than the two thirds a renewed lease always has left), a server
 * freeze 20-100%. The same seed gives the same schedule.
 *
 * @example
 * faultSchedule(7, { durationMs: 5_000, lease: 1_000, kinds: ['holder-frozen-long'] });
 * // [{ kind: 'holder-frozen-long', at: 812, ms: 1_412, pick: 0.53 }, ...]
 */
export function faultSchedule(
  seed: number,
  options: { durationMs: number; lease: number; kinds: readonly PlannedFaultKind[] },
): PlannedFault[] {
  const next = mulberry32(seed);
  const { durationMs, lease } = options;
  const first = [...options.kinds];
  for (let i = first.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [first[i], first[j]] = [first[j], first[i]];
  }
  const faults: PlannedFault[] = [];
  let at = lease * (0.3 + 0.5 * next());
  while (options.kinds.length > 0) {
    const kind = first.shift() ?? options.kinds[Math.floor(next() * options.kinds.length)];
    const ms = Math.round(lease * freezeShare(kind, next()));
    // A fault that would end past the run is left out (and so are the rest).
    if (at + ms > durationMs) break;
    faults.push({ kind, at: Math.round(at), ms, pick: next() });
    at += ms + lease * (0.5 + 0.5 * next()) + (kind === 'holder-killed' ? lease : 0);
  }
  return faults;
}

/** How long a fault of `kind` lasts, in leases, from a draw `u` in [0, 1). */
function freezeShare(kind: PlannedFaultKind, u: number): number {
  switch (kind) {
    case 'holder-frozen-long':
      return 1.3 + 0.5 * u;
    case 'holder-frozen-brief':
      return 0.05 + 0.2 * u;
    case 'server-frozen':
      return 0.2 + 0.8 * u;
    default:
      return 0;
  }
}

/** The schedule in one line per fault, for logs. */
export function describeSchedule(faults: readonly PlannedFault[]): string {
  return faults.map((f) => `${f.at} ms: ${f.kind}${f.ms ? ` for ${f.ms} ms` : ''}`).join('\n');
}
