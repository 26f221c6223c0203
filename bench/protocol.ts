/** What the orchestrator and the worker processes exchange (plain JSON over the fork IPC). */

export const PEERS = [
  'timer',
  'floor',
  'redlock',
  'redlock-tuned',
  'mutex',
  'nest-redlock',
  'ours-locked',
  'ours-locked-order-off',
  'ours-using',
  'ours-locked-seg10',
  'floor-wait1',
  'ours-locked-acks1',
  'ours-rw',
  'ours-permits5',
  'semaphore5',
  'floor-pubsub',
] as const;
export type PeerName = (typeof PEERS)[number];

/**
 * In a key only one process of a run uses (its warm-ups): peers that coordinate the processes
 * of a run (the raw pub/sub pass) leave such keys alone.
 */
export const OWN_KEY = ':own:';

/** The peers of the uncontended scenario (the hot-key ones are these without the floor). */
export const UNCONTENDED_PEERS: readonly PeerName[] = [
  'floor',
  'redlock',
  'redlock-tuned',
  'mutex',
  'nest-redlock',
  'ours-locked',
  // The main row with lock-order checking off: what the default ('warn') costs.
  'ours-locked-order-off',
  'ours-using',
];

/**
 * The peers of the uncontended case on one server with one replica: the cost of waiting for a
 * replica's acknowledgement (`WAIT 1 1000` after the acquire), raw and ours (`replicaAcks: 1`).
 * Never run without a replica: there every WAIT would block for its whole timeout.
 */
export const REPLICA_PEERS: readonly PeerName[] = [
  'floor',
  'floor-wait1',
  'ours-locked',
  'ours-locked-acks1',
];

/**
 * The peers of the read-heavy scenario: the exclusive lock for every call, and read holds for
 * reads with the write lock for writes (the same key, the same loop).
 */
export const READ_HEAVY_PEERS: readonly PeerName[] = ['ours-locked', 'ours-rw'];

/** The peers of the permits scenario: at most 5 holders of one key at once. */
export const PERMITS_PEERS: readonly PeerName[] = ['ours-permits5', 'semaphore5'];

/** The contended scenarios' [processes, callers per process]: 1 x 50 and 4 x 12. */
export const TOPOLOGIES: readonly (readonly [number, number])[] = [
  [1, 50],
  [4, 12],
];

/** How many holders the permits scenario admits at once. */
export const PERMITS = 5;

/**
 * seq: blocks of cycles; hot: callers on one key; rw: the same with reads and writes mixed;
 * mem: cycles on distinct keys with heap samples; holds: many keys held at once; waiters: a long
 * line on one key.
 */
export type Mode = 'seq' | 'hot' | 'rw' | 'mem' | 'holds' | 'waiters';

export interface WorkerSpec {
  mode: Mode;
  /** The peer; seq mode runs every peer of `peers` in one process, interleaved in blocks. */
  peer: PeerName;
  peers: PeerName[];
  /** seq: cycles per block (each round runs one block of every peer, in a rotating order). */
  block: number;
  /** Redis ports of the lock group (1 = single node, 3 = quorum). */
  ports: number[];
  /** The lock key (unique per run). */
  key: string;
  /** Index of this process within the run (for worker ids). */
  proc: number;
  /** How many processes the run has. */
  procs: number;
  /** seq: rounds; hot: iterations per async worker; mem: total cycles. */
  iterations: number;
  /** Warm-up cycles before `ready` (on a key of its own, uncontended). */
  warmup: number;
  /**
   * hot: then iterations per async worker of a contended warm-up before `ready`: all
   * `concurrency` workers on a key of this process only, same section. It compiles the waiting
   * paths too, so a short run measures the steady state, not a cold process.
   */
  contendedWarmup: number;
  /**
   * hot, with several processes: then iterations per async worker on a key every process of
   * the run shares, so the paths between processes (queue entries, grant messages, claims) are
   * compiled too, not only this process's own line.
   */
  sharedWarmup: number;
  /** hot: concurrent async workers in this process; mem: concurrent loops (distinct keys). */
  concurrency: number;
  /** hot: critical section, ms (`await setTimeout(sectionMs)`). */
  sectionMs: number;
  /** hot: think time after each release, ms (0 = none). */
  thinkMs: number;
  /** rw: share of the calls that write (the others read), drawn per caller from a fixed seed. */
  writeShare?: number;
  /** mem: sample every this many cycles. */
  sampleEvery: number;
  /** Lease passed to peers that take one (ms). */
  ttl: number;
  /** The worker stops starting new iterations after this many ms from `go`. */
  budgetMs: number;
  /** hot: also time each handoff's grant message (a pub/sub probe in every process). */
  probe?: boolean;
  /** holds: distinct keys held at once; waiters: callers queued on one key. */
  count?: number;
  /** holds: how long every hold is kept (ms) after the last one was taken. */
  holdMs?: number;
}

/** holds / waiters: one sample of the process over time (not collected: no forced gc). */
export interface TimeSample {
  /** ms since the phase began. */
  t: number;
  heapUsed: number;
  /** Event-loop delay over the interval since the previous sample, ms (p99 / max). */
  loopP99: number;
  loopMax: number;
  /** Client-sent commands over the interval. */
  commands: number;
}

/** holds mode: `count` distinct keys held at once with the watchdog on, then released. */
export interface HoldsResult {
  kind: 'holds';
  count: number;
  taken: number;
  ttl: number;
  holdMs: number;
  acquireMs: number;
  /** heapUsed after gc: before the first hold, with every hold taken, after the release. */
  heapBefore: number;
  heapHeld: number;
  heapAfter: number;
  /** Over the hold phase (after the last acquire, until the release starts). */
  holdPhaseMs: number;
  commandsInHold: CommandCounts;
  /** Event-loop delay over the hold phase, ms. */
  loopP50: number;
  loopP99: number;
  loopMax: number;
  lost: number;
  releaseMs: number;
  releaseFailures: number;
  /** Lock keys (not fence counters) of this run still in Redis after the release. */
  leftInRedis: number;
  samples: TimeSample[];
}

/** waiters mode: `count` callers queued behind one holder on one key. */
export interface WaitersResult {
  kind: 'waiters';
  count: number;
  /** Callers given a short wait on purpose (they must time out, nothing else). */
  shortWaits: number;
  heapBefore: number;
  heapQueued: number;
  granted: number;
  timedOut: number;
  otherErrors: Record<string, number>;
  /** Granted callers that entered before one that arrived (and was still waiting) earlier. */
  outOfOrder: number;
  /** Mean ms per grant in 10 slices of the line, first (longest line) to last. */
  grantMsBySlice: number[];
  /** Line length at the start of each slice. */
  lineAtSlice: number[];
  /** Garbage-collection pauses (ms, summed) in each slice, from `PerformanceObserver('gc')`. */
  gcMsBySlice?: number[];
  drainMs: number;
  /** Length of the shorter lines timed the same way, and each one's ms per grant. */
  shortLine?: number;
  shortLineMsPerGrant?: number[];
  cpuUsPerGrant: number;
  leftInRedis: number;
  loopP99: number;
  samples: TimeSample[];
}

/** Client-sent commands by name, counted by wrapping ioredis `sendCommand`. */
export type CommandCounts = Record<string, number>;

export interface MemSample {
  cycles: number;
  heapUsed: number;
  handles: number;
  resources: Record<string, number>;
}

/** seq: one block of cycles of one peer. */
export interface SeqBlock {
  peer: PeerName;
  round: number;
  cycles: number;
  ms: number;
  /** CPU time of this process over the block (user + system), µs. */
  cpuUs: number;
  client: CommandCounts;
  /** `INFO commandstats` delta over the block (every server of the group). */
  server: CommandCounts;
  /** Server µs spent on the commands this block sent (`INFO commandstats` usec; scripts whole). */
  serverUs: number;
  /**
   * `INFO commandstats` usec delta by command over the block: a script's own line (evalsha)
   * includes what it ran, which also shows under each command's name (get, set, time...).
   */
  serverUsBy: CommandCounts;
}

export interface WorkerResult {
  type: 'result';
  proc: number;
  /** hrtime ms (CLOCK_MONOTONIC, shared by every process of the machine). */
  startedAt: number;
  endedAt: number;
  /** Completed critical sections (hot) or cycles (seq, mem). */
  done: number;
  /** Failed acquires by error name (not retried). */
  failures: Record<string, number>;
  /** hot: wait of each successful call, ms. */
  waits: number[];
  /** hot: sections as flat triples [worker, enter, exit] (worker = proc * 1000 + index). */
  sections: number[];
  /** hot with segments: the slice of each section (same order), -1 when none. */
  segments: number[];
  /** rw: 1 for a write, 0 for a read, per section (same order). */
  kinds?: number[];
  /** rw: the wait of each successful write, ms. */
  writeWaits?: number[];
  clientCommands: CommandCounts;
  /** CPU time of this process from `go` to the end of its loop (user + system), µs. */
  cpuUs: number;
  timedOut: boolean;
  mem?: MemSample[];
  blocks?: SeqBlock[];
  /** hot: arrival (call) time of each section, same order as `sections`. */
  arrivals?: number[];
  /** hot with `probe`: when this process's probe heard each grant message (monotonic ms). */
  grantHeard?: number[];
  /** hot: when each section's release had resolved (same order as `sections`). */
  released?: number[];
  scale?: HoldsResult | WaitersResult;
}

export type ToWorker = { type: 'go' } | { type: 'stop' };
export type FromWorker =
  { type: 'ready' } | WorkerResult | { type: 'fatal'; message: string; skip?: boolean };
