/**
 * What a history is made of: the steps of every lock call, the faults injected while they ran,
 * the writes a fenced store saw. Every time is in ms of one clock that every recorder reads
 * alike (see docs/histories.md: `process.hrtime`, CLOCK_MONOTONIC, on one Linux machine).
 */

/** Who made a call: an OS process (its pid) or an instance's name. */
export type HistoryProcess = string | number;

/** The steps of one lock call, in the order they happen. */
export type HistoryStep =
  | 'acquire-invoke'
  | 'acquire-ok'
  | 'acquire-fail'
  /** The holder's `signal` aborted: the library told it the lease is gone. */
  | 'lost'
  | 'release-invoke'
  | 'release-ok';

/** One step of one lock call, as its caller recorded it. */
export interface HistoryEvent {
  readonly process: HistoryProcess;
  /** The call within its process (one acquire and its release); unique per process. */
  readonly call: string | number;
  readonly key: string;
  readonly step: HistoryStep;
  readonly at: number;
  /** `acquire-ok`: the fence the holder got for `key`. */
  readonly fence?: number;
}

/**
 * A fault in effect during the history. `from` and `to` are equal for one that happens at once
 * (a kill). Only some kinds can explain two holders at once (docs/histories.md); the others are
 * listed so a report can name what was going on.
 */
export type HistoryFault =
  /** The process could not run (SIGSTOP to SIGCONT, or an event-loop pause it measured). */
  | (FaultSpan<'process-frozen'> & { readonly process: HistoryProcess })
  /** The process ended (SIGKILL): its open hold ends here. */
  | (FaultSpan<'process-killed'> & { readonly process: HistoryProcess })
  /**
   * The server ended a session that its locks live in (`pg_terminate_backend`, `KILL
   * CONNECTION`, an etcd lease revoked): of `process`, or of every holder when absent.
   */
  | (FaultSpan<'session-killed'> & { readonly process?: HistoryProcess })
  /** A server (or one member or node) down from `from` to `to`; `forgetsLocks`: it came back without them. */
  | (FaultSpan<'server-restarted'> & { readonly forgetsLocks: boolean })
  | FaultSpan<'server-frozen'>
  /** Connections cut without ending a session its locks live in (Redis `CLIENT KILL`). */
  | FaultSpan<'connection-killed'>;

interface FaultSpan<K extends string> {
  readonly kind: K;
  readonly from: number;
  readonly to: number;
  /** Which server, node or member, for messages. */
  readonly node?: string;
  /** Where the fault came from ('schedule', 'measured'...), for messages. */
  readonly source?: string;
}

/** One write a fenced store saw (it refuses a fence below the highest it has accepted). */
export interface FencedWrite {
  readonly process: HistoryProcess;
  readonly call: string | number;
  readonly key: string;
  readonly fence: number;
  /** When the store decided. */
  readonly at: number;
  readonly accepted: boolean;
}

/** What `checkHistory` takes. */
export interface HistoryInput {
  readonly events: readonly HistoryEvent[];
  readonly faults?: readonly HistoryFault[];
  readonly writes?: readonly FencedWrite[];
  /**
   * How long the server keeps a holder's key once it stops hearing from it: the ttl on Redis,
   * the session lease on etcd and ZooKeeper, `Infinity` where a frozen holder keeps its
   * session (PostgreSQL, MySQL).
   */
  readonly lease: number;
  /** How often a live holder renews; default `lease / 3` (the library's watchdog). */
  readonly renewEvery?: number;
  /** The unfenced counter: increments written, and its value at the end. */
  readonly counter?: { readonly increments: number; readonly value: number };
  /** End of the history: a hold with no release and no kill ends here. Default: the last event. */
  readonly end?: number;
}

/** One acquire that succeeded, with the section it guarded. */
export interface Hold {
  readonly process: HistoryProcess;
  readonly call: string | number;
  readonly key: string;
  readonly fence: number | undefined;
  readonly invokedAt: number;
  /** `acquire-ok`: the section starts. */
  readonly start: number;
  /** `release-invoke`, or the process's kill, or the history's end: the section ends. */
  readonly end: number;
  /** `release-ok`, or `end` when the release did not finish. */
  readonly releasedAt: number;
  /** When the holder was told its lease was gone, if it was before `end`. */
  readonly lostAt?: number;
}

/** Why two holds of one key overlapped. */
export type OverlapClass =
  /** The first holder's process was frozen long enough for its lease to run out. */
  | 'holder-frozen'
  /** The server ended the session the first holder's lock lived in. */
  | 'session-killed'
  /** The server the lock was on restarted without it while the first holder held it. */
  | 'server-forgot'
  /** The first holder had been told (its signal aborted) before the second started. */
  | 'lease-ended'
  /** None of the above: a second holder within a valid lease, a bug. */
  | 'second-holder-within-valid-lease';

export interface Overlap {
  readonly key: string;
  readonly first: Hold;
  readonly second: Hold;
  /** `[second.start, min(first.end, second.end)]`. */
  readonly from: number;
  readonly to: number;
  readonly class: OverlapClass;
  /** The fault that explains it, when one does. */
  readonly fault?: HistoryFault;
}

/** A hold whose fence is not larger than that of a hold of its key that started before it. */
export interface FenceViolation {
  readonly key: string;
  readonly earlier: Hold;
  readonly later: Hold;
}

/** The longest stretch in which a key had callers waiting and no holder. */
export interface Unavailability {
  readonly key: string;
  readonly from: number;
  readonly to: number;
  readonly ms: number;
}

/** What `checkHistory` found. */
export interface HistoryReport {
  readonly holds: number;
  readonly acquireFailures: number;
  /** Holds whose holder was told its lease was gone before it released. */
  readonly holdsLost: number;
  readonly overlaps: readonly Overlap[];
  readonly explained: number;
  /** The overlaps classed `second-holder-within-valid-lease`. */
  readonly unexplained: readonly Overlap[];
  readonly fenceViolations: readonly FenceViolation[];
  readonly writesAccepted: number;
  readonly writesRefused: number;
  /** Accepted writes of a holder whose key a later holder had already written: must be none. */
  readonly staleWritesAccepted: readonly FencedWrite[];
  /** Increments written minus the counter's final value; undefined without `counter`. */
  readonly lostIncrements: number | undefined;
  readonly longestUnavailability: Unavailability | undefined;
  /** Events that do not fit their call (a step out of order, an ok without invoke). */
  readonly malformed: readonly HistoryEvent[];
}
