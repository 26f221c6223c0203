/**
 * `npm run bench`: every scenario against every peer, in one run, on redis-servers spawned here.
 *
 *   node dist-apps/bench/run.js [--runs 3] [--quick] [--only hot,segmented] [--peers a,b]
 *     [--mem-cycles 1000000] [--mem-runs N] [--child-timeout 60000] [--out bench/results]
 *
 * Scenarios: uncontended (1 and 3 servers, and 1 server + 1 replica for replicaAcks), hot (with
 * the serial ideals), segmented, memory.
 * Every worker is a forked process with bounded iterations, an internal time budget and a hard
 * wall-clock cap after which it is killed by PID. Results: bench/results/latest.{md,json,svg}.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import {
  PEERS,
  PERMITS_PEERS,
  READ_HEAVY_PEERS,
  REPLICA_PEERS,
  TOPOLOGIES,
  UNCONTENDED_PEERS,
  type CommandCounts,
  type FromWorker,
  type HoldsResult,
  type MemSample,
  type PeerName,
  type WaitersResult,
  type ToWorker,
  type WorkerResult,
  type WorkerSpec,
} from './protocol';
import { addCounts, commandStats, countsDelta, serverCpuSeconds } from './commandstats';
import {
  ensureRedisServer,
  killAllStartedSync,
  type RedisProcess,
  startRedis,
} from '../scripts/redis';
import { runBackends } from './backends/run-backends';
import { writeReport } from './report';
import { measureLockOrderMemory } from './lock-order-memory';
import { fmt } from './report-format';
import {
  handoffGaps,
  handoffSplit,
  type HandoffSplit,
  maxConcurrent,
  median,
  outOfOrder,
  percentile,
  max,
  min,
  overlaps,
  streaks,
  type Section,
  writeOverlaps,
} from './stats';

// ------------------------------------------------------------------ options

const SCENARIOS = [
  'uncontended',
  'hot',
  'segmented',
  'readheavy',
  'permits',
  'memory',
  'handoff',
  'many',
  'holds',
  'waiters',
  'backends',
  'lockorder',
] as const;

/** Options set from a plain numeric flag. */
type NumericOption =
  | 'seqRounds'
  | 'seqBlock'
  | 'seqWarmup'
  | 'hotIterations'
  | 'segIterations'
  | 'rwIterations'
  | 'permitIterations'
  | 'memConcurrency'
  | 'memRuns'
  | 'childTimeoutMs'
  | 'memTimeoutMs'
  | 'handoffIterations'
  | 'handoffWarmup'
  | 'manyRounds'
  | 'holdCount'
  | 'holdMs'
  | 'waiterCount'
  | 'scaleRuns'
  | 'waiterRuns';
type Scenario = (typeof SCENARIOS)[number];

export interface Options {
  runs: number;
  quick: boolean;
  only: Scenario[];
  peers?: PeerName[];
  seqRounds: number;
  seqBlock: number;
  seqWarmup: number;
  hotIterations: number;
  /** Contended warm-up sections per caller of each hot-key and segmented process. */
  hotWarmup: number;
  serialIterations: number;
  segIterations: number;
  /** Iterations per caller of the fast peers of the read-heavy and permits scenarios. */
  rwIterations: number;
  permitIterations: number;
  memCycles: number;
  memEvery: number;
  memConcurrency: number;
  memRuns: number;
  childTimeoutMs: number;
  memTimeoutMs: number;
  /** handoff: sections per caller (2 processes x 1 caller). */
  handoffIterations: number;
  /** handoff: sections per caller on the shared key before the timed run. */
  handoffWarmup: number;
  /** many: rounds of one block per peer (each block 8 cycles per caller). */
  manyRounds: number;
  /** holds: distinct keys held at once, and for how long (ms) after the last was taken. */
  holdCount: number;
  holdMs: number;
  /** waiters: callers queued on one key. */
  waiterCount: number;
  /** Runs of the holds and waiters scenarios (default 1: each is long). */
  scaleRuns: number;
  /** Runs of the waiters scenario (default 3: its per-tenth figures are medians over runs). */
  waiterRuns: number;
  out: string;
  /** The built library to benchmark (default: ./dist). */
  lib: string;
}

const ROOT = path.resolve(__dirname, '..', '..');

function usage(): never {
  console.log(`Usage: npm run bench -- [options]
  --runs N             runs per figure, the median is reported (default 3; --quick: 1)
  --quick              fast smoke run of everything (1 run, few iterations, 100k memory cycles)
  --only a,b           scenarios: ${SCENARIOS.join(', ')} (hot and permits include the serial ideals;
                       uncontended includes 1 server + 1 replica, a 4th redis-server)
  --peers a,b          only these peers: ${PEERS.join(', ')}
  --seq-rounds N       uncontended: rounds per run, one block of every peer each (default 10)
  --seq-block N        uncontended: cycles per block (default 500)
  --seq-warmup N       uncontended and many keys: warm-up cycles per peer (default 5000)
  --hot-iterations N   iterations per caller in the hot-key scenarios (default 20)
  --seg-iterations N   iterations per caller in the segmented scenario (default 160)
  --rw-iterations N    iterations per caller with read holds in the readheavy scenario
                       (default 200; the exclusive lock does --hot-iterations)
  --permit-iterations N  iterations per caller of permits: 5 (default 100; redis-semaphore
                       does --hot-iterations)
  --mem-cycles N       cycles of the memory scenario (default 1000000; --quick: 100000)
  --mem-concurrency N  concurrent loops (distinct keys) of the memory scenario (default 16)
  --mem-runs N         runs of the memory scenario (default: as --runs)
  --child-timeout MS   hard wall-clock cap per worker process (default 60000)
  --mem-timeout MS     hard cap for the memory worker (default 300000)
  --handoff-iterations N  handoff: sections per caller, 2 processes x 1 caller (default 1000)
  --handoff-warmup N   handoff: sections per caller passed between the two processes before
                       the timed run (default 3000)
  --many-rounds N      many keys: rounds of one block per peer (default 5)
  --hold-count N       holds: distinct keys held at once (default 100000; --quick: 10000)
  --hold-ms MS         holds: how long they are held after the last was taken (default 40000,
                       4 renewals at ttl 30 s; the issue's full figure is 120000; --quick: 12000)
  --waiter-count N     waiters: callers queued on one key (default 10000; --quick: 2000)
  --scale-runs N       runs of the holds scenario (default 1)
  --waiter-runs N      runs of the waiters scenario (default 3; --quick: 1)
  --out DIR            where latest.{md,json,svg} go (default bench/results)
  --lib DIR            benchmark this built library (a dist/ directory; default ./dist)`);
  process.exit(0);
}

export function parseArgs(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    runs: quick ? 1 : 3,
    quick,
    only: [...SCENARIOS],
    seqRounds: quick ? 3 : 10,
    seqBlock: quick ? 200 : 500,
    // Warm code is what the uncontended and many-keys figures compare: with 1,000 cycles ours
    // was still being compiled (--trace-opt: TurboFan runs until ~3,000-4,000 cycles, the
    // per-call functions of a larger library reach their budget later than the floor's few).
    seqWarmup: quick ? 200 : 5000,
    hotIterations: quick ? 5 : 20,
    hotWarmup: quick ? 2 : 10,
    serialIterations: quick ? 200 : 1000,
    // 160: a segmented 4 x 12 run then lasts ~1.5 s; at 40 (0.4 s) it mostly measured JIT warm-up
    // of four cold processes (5.95x at 40, 7.1x at 160, same build).
    segIterations: quick ? 10 : 160,
    // The shared holds run ~10x (read-heavy) and ~5x (permits) as many sections per second as
    // one exclusive key: as many more iterations give runs of the same ~1-2 s.
    rwIterations: quick ? 20 : 200,
    permitIterations: quick ? 10 : 100,
    memCycles: quick ? 100_000 : 1_000_000,
    memEvery: quick ? 10_000 : 100_000,
    memConcurrency: 16,
    memRuns: 0,
    childTimeoutMs: 60_000,
    memTimeoutMs: 300_000,
    // The cross-process path (queue entries, grant messages, claims) runs once per section, so
    // it compiles slowly: timed after an uncontended warm-up, 200 sections gave p50 0.51 ms and
    // p99 3.0 ms; 1,000 more after 1,000 shared ones 0.45 / 2.2; after 3,000 shared, 0.44 / 0.99
    // (same build, a driver of its own).
    handoffIterations: quick ? 50 : 1000,
    handoffWarmup: quick ? 50 : 3000,
    manyRounds: quick ? 2 : 5,
    holdCount: quick ? 10_000 : 100_000,
    holdMs: quick ? 12_000 : 40_000,
    waiterCount: quick ? 2_000 : 10_000,
    scaleRuns: 1,
    waiterRuns: quick ? 1 : 3,
    out: path.join(ROOT, 'bench', 'results'),
    lib: path.join(ROOT, 'dist'),
  };
  const NUMERIC_FLAGS: Record<string, NumericOption> = {
    '--seq-rounds': 'seqRounds',
    '--seq-block': 'seqBlock',
    '--seq-warmup': 'seqWarmup',
    '--hot-iterations': 'hotIterations',
    '--seg-iterations': 'segIterations',
    '--rw-iterations': 'rwIterations',
    '--permit-iterations': 'permitIterations',
    '--mem-concurrency': 'memConcurrency',
    '--mem-runs': 'memRuns',
    '--child-timeout': 'childTimeoutMs',
    '--mem-timeout': 'memTimeoutMs',
    '--handoff-iterations': 'handoffIterations',
    '--handoff-warmup': 'handoffWarmup',
    '--many-rounds': 'manyRounds',
    '--hold-count': 'holdCount',
    '--hold-ms': 'holdMs',
    '--waiter-count': 'waiterCount',
    '--scale-runs': 'scaleRuns',
    '--waiter-runs': 'waiterRuns',
  };
  const num = (flag: string, v: string | undefined) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} needs a positive number`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.includes('=') ? a.split('=', 2) : [a, undefined];
    const value = () => inline ?? argv[++i];
    switch (flag) {
      case '--quick':
        break;
      case '--help':
      case '-h':
        usage();
        break;
      case '--runs':
        o.runs = Math.floor(num(flag, value()));
        break;
      case '--only': {
        const list = value().split(',') as Scenario[];
        for (const s of list) {
          if (!SCENARIOS.includes(s)) throw new Error(`--only: unknown scenario "${s}"`);
        }
        o.only = list;
        break;
      }
      case '--peers': {
        const list = value().split(',') as PeerName[];
        for (const p of list) if (!PEERS.includes(p)) throw new Error(`--peers: unknown "${p}"`);
        o.peers = list;
        break;
      }
      case '--mem-cycles':
        o.memCycles = Math.floor(num(flag, value()));
        o.memEvery = Math.max(1, Math.floor(o.memCycles / 10));
        break;
      case '--out':
        o.out = path.resolve(value());
        break;
      case '--lib':
        o.lib = path.resolve(value());
        break;
      default: {
        const field = NUMERIC_FLAGS[flag];
        if (!field) throw new Error(`unknown option ${a} (try --help)`);
        const n = num(flag, value());
        o[field] = field.endsWith('Ms') ? n : Math.floor(n);
      }
    }
  }
  if (o.memRuns === 0) o.memRuns = o.runs;
  return o;
}

// ------------------------------------------------------------------ cases

export type CaseScenario =
  | 'uncontended'
  | 'serial'
  | 'hot'
  | 'segmented'
  | 'readheavy'
  | 'permits'
  | 'memory'
  | 'handoff'
  | 'many'
  | 'holds'
  | 'waiters';

/** Peers of the many-keys scenario (the floor first: every block is paired with its block). */
const MANY_PEERS: PeerName[] = ['floor', 'redlock', 'mutex', 'nest-redlock', 'ours-locked'];
/** Peers that can keep a lock renewed until told (holds). */
const HOLD_PEERS: PeerName[] = ['ours-locked', 'redlock', 'mutex'];
/** Peers of the handoff scenario (redlock defaults would measure its 200 ms retry delay). */
const HANDOFF_PEERS: PeerName[] = ['floor-pubsub', 'redlock-tuned', 'mutex', 'ours-locked'];
/** Lease of the holds scenario (the issue's: 30 s, renewed every 10 s). */
const HOLD_TTL = 30_000;

export interface CaseDef {
  /** Summary id (one peer); a multi-peer job's runs are split into one summary per peer. */
  id: string;
  scenario: CaseScenario;
  /** Configuration label: '1 server', '1x50', '4x12 think 5 ms', ... */
  config: string;
  peer: PeerName;
  /** Every peer this job measures (seq: all in one process; otherwise just `peer`). */
  peers: PeerName[];
  servers: number;
  /**
   * uncontended only: server 0 has a replica (a 4th redis-server) while this case runs, and
   * only then (REPLICAOF before each run, REPLICAOF NO ONE after).
   */
  replica?: boolean;
  procs: number;
  spec: Omit<WorkerSpec, 'ports' | 'key' | 'proc' | 'procs' | 'peer' | 'peers'>;
  runs: number;
  capMs: number;
}

const HOT_PEERS = UNCONTENDED_PEERS.filter((p) => p !== 'floor');
/** Lease for peers that take one: long, because redlock 5 beta counts it from the first try. */
const TTL = 10_000;
/** Read-heavy: 5% of the calls write, 95% read. */
const READ_HEAVY_WRITE_SHARE = 0.05;

export function buildCases(o: Options): CaseDef[] {
  const cases: CaseDef[] = [];
  const want = (p: PeerName) => !o.peers || o.peers.includes(p);
  const budget = (cap: number) => Math.max(5_000, cap - 20_000);
  const base = {
    sectionMs: 1,
    thinkMs: 0,
    sampleEvery: 0,
    block: 0,
    contendedWarmup: 0,
    sharedWarmup: 0,
    ttl: TTL,
    budgetMs: budget(o.childTimeoutMs),
  };
  /** A case of one peer on one server: `o.runs` runs under the child cap unless `limits` says. */
  const onePeer = (
    c: Pick<CaseDef, 'id' | 'scenario' | 'config' | 'peer' | 'spec'> & { procs?: number },
    limits: Pick<CaseDef, 'runs' | 'capMs'> = { runs: o.runs, capMs: o.childTimeoutMs },
  ): CaseDef => ({
    id: c.id,
    scenario: c.scenario,
    config: c.config,
    peer: c.peer,
    peers: [c.peer],
    servers: 1,
    procs: c.procs ?? 1,
    spec: c.spec,
    ...limits,
  });
  /** The spec of a contended case: `callers` per process on one key, after a contended warm-up. */
  const contended = (
    callers: number,
    iterations: number,
    extra?: Partial<CaseDef['spec']>,
  ): CaseDef['spec'] => ({
    ...base,
    mode: 'hot',
    iterations,
    warmup: 50,
    contendedWarmup: o.hotWarmup,
    sharedWarmup: o.hotWarmup,
    concurrency: callers,
    ...extra,
  });
  /** A contended case per topology and peer, `<scenario>:<procs>x<callers>:<peer>`. */
  const perTopology = (
    scenario: CaseScenario,
    peers: readonly PeerName[],
    iterations: (peer: PeerName) => number,
    extra?: Partial<CaseDef['spec']>,
  ) => {
    for (const [procs, callers] of TOPOLOGIES) {
      for (const peer of peers) {
        cases.push(
          onePeer({
            id: `${scenario}:${procs}x${callers}:${peer}`,
            scenario,
            config: `${procs}x${callers}`,
            peer,
            procs,
            spec: contended(callers, iterations(peer), extra),
          }),
        );
      }
    }
  };
  /** The peers of `list` asked for, the floor first (a seq job pairs every block with its). */
  const withFloor = (list: readonly PeerName[]): PeerName[] => {
    const peers = list.filter(want);
    if (peers.length && !peers.includes('floor')) peers.unshift('floor');
    return peers;
  };
  /** A seq job: every peer in one process, rounds of one block each, `o.runs` runs. */
  const seqJob = (
    c: Pick<CaseDef, 'id' | 'scenario' | 'config' | 'peers' | 'servers' | 'replica' | 'capMs'>,
    spec: Pick<CaseDef['spec'], 'iterations' | 'block' | 'concurrency'>,
  ): CaseDef => ({
    id: c.id,
    scenario: c.scenario,
    config: c.config,
    peer: 'floor',
    peers: c.peers,
    servers: c.servers,
    ...(c.replica ? { replica: true } : {}),
    procs: 1,
    spec: {
      ...base,
      mode: 'seq',
      iterations: spec.iterations,
      block: spec.block,
      warmup: o.seqWarmup,
      concurrency: spec.concurrency,
    },
    runs: o.runs,
    capMs: c.capMs,
  });
  if (o.only.includes('hot') || o.only.includes('permits')) {
    // The ideals, measured in the same run: 1 worker, same loop; no lock / the raw floor.
    for (const peer of ['timer', 'floor'] as PeerName[]) {
      cases.push(
        onePeer({
          id: `serial:${peer}`,
          scenario: 'serial',
          config: '1 worker',
          peer,
          spec: {
            ...base,
            mode: 'hot',
            iterations: o.serialIterations,
            warmup: peer === 'timer' ? 0 : 200,
            concurrency: 1,
          },
        }),
      );
    }
  }
  if (o.only.includes('uncontended')) {
    const uncontended = { iterations: o.seqRounds, block: o.seqBlock, concurrency: 1 };
    const peers = withFloor(UNCONTENDED_PEERS);
    // None of their peers asked for (--peers timer, --peers floor-wait1): no case to run (a case
    // with no peers used to crash the orchestrator).
    for (const servers of peers.length ? [1, 3] : []) {
      cases.push(
        seqJob(
          {
            id: `uncontended:${servers}`,
            scenario: 'uncontended',
            config: servers === 1 ? '1 server' : '3 servers',
            peers,
            servers,
            capMs: o.childTimeoutMs,
          },
          uncontended,
        ),
      );
    }
    // One server with one replica: what waiting for a replica's acknowledgement costs (WAIT
    // after each acquire), raw (floor-wait1) and ours (replicaAcks: 1), next to both without.
    const replicaPeers = withFloor(REPLICA_PEERS);
    if (replicaPeers.length) {
      cases.push(
        seqJob(
          {
            id: 'uncontended:1+replica',
            scenario: 'uncontended',
            config: '1 server + 1 replica',
            peers: replicaPeers,
            servers: 1,
            replica: true,
            capMs: o.childTimeoutMs,
          },
          uncontended,
        ),
      );
    }
  }
  if (o.only.includes('hot')) {
    for (const thinkMs of [0, 5]) {
      for (const [procs, callers] of TOPOLOGIES) {
        for (const peer of HOT_PEERS.filter(want)) {
          cases.push(
            onePeer({
              id: `hot:${procs}x${callers}:think${thinkMs}:${peer}`,
              scenario: 'hot',
              config: `${procs}x${callers}${thinkMs ? ` think ${thinkMs} ms` : ''}`,
              peer,
              procs,
              spec: contended(callers, o.hotIterations, { thinkMs }),
            }),
          );
        }
      }
    }
  }
  if (o.only.includes('segmented')) {
    perTopology('segmented', ['ours-locked', 'ours-locked-seg10'], () => o.segIterations);
  }
  if (o.only.includes('handoff')) {
    // Cross-process handoff: 2 processes x 1 caller on one key, so every handoff crosses. Both
    // first pass the key between them `handoffWarmup` times (the cross-process path compiled).
    // The gap is timed without a probe (its PUBLISH deliveries and its event-loop work would
    // load the path it measures); one more case of ours with the probe splits the gap.
    const spec = (probe: boolean) =>
      contended(1, o.handoffIterations, {
        warmup: 200,
        sharedWarmup: o.handoffWarmup,
        ...(probe ? { probe } : {}),
      });
    for (const peer of HANDOFF_PEERS.filter(want)) {
      cases.push(
        onePeer({
          id: `handoff:2x1:${peer}`,
          scenario: 'handoff',
          config: '2x1',
          peer,
          procs: 2,
          spec: spec(false),
        }),
      );
    }
    if (want('ours-locked')) {
      cases.push(
        onePeer({
          id: 'handoff:2x1:ours-locked:probe',
          scenario: 'handoff',
          config: '2x1 probe',
          peer: 'ours-locked',
          procs: 2,
          spec: spec(true),
        }),
      );
    }
  }
  if (o.only.includes('many')) {
    const peers = withFloor(MANY_PEERS);
    for (const callers of peers.length ? [64, 1024] : []) {
      cases.push(
        seqJob(
          {
            id: `many:${callers}`,
            scenario: 'many',
            config: `${callers} callers`,
            peers,
            servers: 1,
            capMs: o.childTimeoutMs * 2,
          },
          { iterations: o.manyRounds, block: callers * 8, concurrency: callers },
        ),
      );
    }
  }
  const scaleCap = (ms: number) => ms + 240_000;
  if (o.only.includes('holds')) {
    for (const peer of HOLD_PEERS.filter(want)) {
      cases.push(
        onePeer(
          {
            id: `holds:${peer}`,
            scenario: 'holds',
            config: `${o.holdCount} holds, ttl ${HOLD_TTL / 1000} s, ${o.holdMs / 1000} s`,
            peer,
            spec: {
              ...base,
              mode: 'holds',
              iterations: 1,
              warmup: 200,
              concurrency: 256,
              ttl: HOLD_TTL,
              count: o.holdCount,
              holdMs: o.holdMs,
              budgetMs: scaleCap(o.holdMs) - 60_000,
            },
          },
          { runs: o.scaleRuns, capMs: scaleCap(o.holdMs) },
        ),
      );
    }
  }
  if (o.only.includes('waiters') && want('ours-locked')) {
    cases.push(
      onePeer(
        {
          id: 'waiters:ours-locked',
          scenario: 'waiters',
          config: `${o.waiterCount} waiters on one key`,
          peer: 'ours-locked',
          spec: {
            ...base,
            mode: 'waiters',
            iterations: 1,
            warmup: 200,
            concurrency: 1,
            count: o.waiterCount,
            budgetMs: 120_000,
          },
        },
        { runs: o.waiterRuns, capMs: 180_000 },
      ),
    );
  }
  if (o.only.includes('readheavy')) {
    perTopology(
      'readheavy',
      READ_HEAVY_PEERS.filter(want),
      (peer) => (peer === 'ours-rw' ? o.rwIterations : o.hotIterations),
      { mode: 'rw', writeShare: READ_HEAVY_WRITE_SHARE },
    );
  }
  if (o.only.includes('permits')) {
    perTopology('permits', PERMITS_PEERS.filter(want), (peer) =>
      peer === 'ours-permits5' ? o.permitIterations : o.hotIterations,
    );
  }
  if (o.only.includes('memory')) {
    cases.push(
      onePeer(
        {
          id: 'memory:ours-locked',
          scenario: 'memory',
          config: `${o.memCycles} cycles, ${o.memConcurrency} loops`,
          peer: 'ours-locked',
          spec: {
            ...base,
            mode: 'mem',
            iterations: o.memCycles,
            warmup: 2000,
            concurrency: o.memConcurrency,
            sampleEvery: o.memEvery,
            budgetMs: budget(o.memTimeoutMs),
          },
        },
        { runs: o.memRuns, capMs: o.memTimeoutMs },
      ),
    );
  }
  return cases;
}

// ------------------------------------------------------------------ one run of one case

export interface RunRecord {
  id: string;
  run: number;
  ok: boolean;
  skipped?: boolean;
  error?: string;
  timedOut: boolean;
  wallMs: number;
  done: number;
  /** Sections (or cycles) per second. */
  rate: number;
  failures: Record<string, number>;
  waitP50?: number;
  waitP99?: number;
  waitMax?: number;
  streakMax?: number;
  streakMean?: number;
  /** hot: median gap exit -> next entry (ms), next holder in the same / another process. */
  gapSameP50?: number;
  gapOtherP50?: number;
  /** hot: share of handoffs that went to another process. */
  otherShare?: number;
  /** seq: CPU time of the worker process per cycle (user + system), µs. */
  cpuUsPerOp?: number;
  /** seq: server µs per cycle on the commands the peer sent (scripts with what they ran). */
  serverUsPerOp?: number;
  /** hot, mem: CPU time of all worker processes / all servers over the run, µs. */
  clientCpuUs?: number;
  serverCpuUs?: number;
  overlapCount?: number;
  overlapMaxMs?: number;
  /** rw: p99 wait of the writes, and how many writes (`overlapCount`: those overlapped). */
  writeWaitP99?: number;
  writes?: number;
  /** The most sections in progress at once (permits: must not exceed the permits). */
  maxConcurrent?: number;
  busyFraction?: number;
  segmentsUsed?: number;
  /** hot: share of sections that entered before a caller that had arrived (and waited) earlier. */
  outOfOrder?: number;
  /** handoff: where the time of a cross-process handoff goes (see HandoffSplit). */
  handoff?: HandoffSplit;
  clientCommands: CommandCounts;
  serverCommands: CommandCounts;
  /** seq: server µs by command (`INFO commandstats` usec; see SeqBlock.serverUsBy). */
  serverUsCommands?: CommandCounts;
  mem?: MemSample[];
  scale?: HoldsResult | WaitersResult;
  /** seq: median over rounds of this peer's block rate / the floor's block rate that round. */
  vsFloor?: number;
}

const live = new Set<ChildProcess>();

/**
 * Other engineers rebuild dist/ and dist-apps/ (rimraf + tsc) while a long benchmark runs, so
 * the workers run from a private copy taken at start: the built library, the built bench, a
 * package.json naming it `nest-locked` (self-reference) and a symlink to node_modules.
 */
let snapshotDir: string | undefined;
let workerJs = path.join(__dirname, 'workers', 'worker.js');

function takeSnapshot(lib: string): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nest-locked-bench-'));
  snapshotDir = dir;
  const required = ['dist/index.js', 'dist-apps/bench/workers/worker.js'];
  for (let attempt = 1; ; attempt++) {
    try {
      fs.rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
      fs.rmSync(path.join(dir, 'dist-apps'), { recursive: true, force: true });
      fs.cpSync(lib, path.join(dir, 'dist'), { recursive: true });
      fs.cpSync(__dirname, path.join(dir, 'dist-apps', 'bench'), { recursive: true });
      const missing = required.filter((f) => !fs.existsSync(path.join(dir, f)));
      if (missing.length) throw new Error(`missing ${missing.join(', ')} (a rebuild in progress?)`);
      break;
    } catch (err) {
      if (attempt >= 20) throw err;
      // Bounded wait for someone else's build to finish.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    }
  }
  fs.writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({
      name: 'nest-locked',
      version: ownVersion(),
      private: true,
      main: 'dist/index.js',
      exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
    }),
  );
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  workerJs = path.join(dir, 'dist-apps', 'bench', 'workers', 'worker.js');
}

function removeSnapshot(): void {
  if (!snapshotDir) return;
  const dir = snapshotDir;
  snapshotDir = undefined;
  // Unlink the node_modules symlink first: never recurse into the real node_modules.
  fs.rmSync(path.join(dir, 'node_modules'), { force: true });
  fs.rmSync(dir, { recursive: true, force: true });
}

function killChild(child: ChildProcess): void {
  if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

type Outcome = FromWorker | { type: 'exit'; code: number | null; signal: string | null };

interface Worker {
  child: ChildProcess;
  ready: Promise<Outcome>;
  result: Promise<Outcome>;
  exited: Promise<void>;
  log: () => string;
}

function spawnWorker(spec: WorkerSpec, execArgv: string[]): Worker {
  const child = fork(workerJs, [JSON.stringify(spec)], {
    execArgv,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    cwd: ROOT,
  });
  live.add(child);
  let tail = '';
  const keep = (d: Buffer) => (tail = (tail + d.toString()).slice(-3000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // A send to a worker that just died fails with EPIPE: the exit is reported, not thrown.
  child.on('error', (err) => (tail += `\n[${err.message}]`));
  const exit = new Promise<Outcome>((resolve) =>
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ type: 'exit', code, signal });
    }),
  );
  const on = (types: string[]) =>
    Promise.race([
      new Promise<Outcome>((resolve) => {
        const h = (m: FromWorker) => {
          if (types.includes(m.type)) {
            child.off('message', h);
            resolve(m);
          }
        };
        child.on('message', h);
      }),
      exit,
    ]);
  return {
    child,
    ready: on(['ready', 'fatal']),
    result: on(['result', 'fatal']),
    exited: exit.then(() => undefined),
    log: () => tail,
  };
}

function tell(child: ChildProcess, m: ToWorker): void {
  if (child.connected) child.send(m, () => undefined);
}

async function runCase(
  def: CaseDef,
  run: number,
  servers: RedisProcess[],
  conns: Redis[],
): Promise<RunRecord[]> {
  const ports = servers.slice(0, def.servers).map((s) => s.port);
  const statConns = conns.slice(0, def.servers);
  const key = `bench:${def.id}:${run}:${randomBytes(4).toString('hex')}`;
  const record = blankRecord(def.id, run);
  const execArgv = ['mem', 'holds', 'waiters'].includes(def.spec.mode) ? ['--expose-gc'] : [];
  const workers = Array.from({ length: def.procs }, (_, proc) =>
    spawnWorker(
      { ...def.spec, peer: def.peer, peers: def.peers, ports, key, proc, procs: def.procs },
      execArgv,
    ),
  );
  let killed = false;
  const cap = setTimeout(() => {
    killed = true;
    for (const w of workers) killChild(w.child);
  }, def.capMs);
  const fail = async (why: string, skipped = false) => {
    for (const w of workers) tell(w.child, { type: 'stop' });
    await Promise.all(workers.map((w) => w.exited));
    clearTimeout(cap);
    return failedRuns(def, run, why, skipped);
  };
  const describe = (o: Outcome, w: Worker) =>
    o.type === 'fatal'
      ? o.message
      : o.type === 'exit'
        ? `worker exited (code ${o.code}, signal ${o.signal})${killed ? ` after the ${def.capMs} ms cap` : ''}: ${w.log()}`
        : `unexpected ${o.type}`;

  const readies = await Promise.all(workers.map((w) => w.ready));
  const notReady = readies.findIndex((r) => r.type !== 'ready');
  if (notReady >= 0) {
    const o = readies[notReady];
    return fail(describe(o, workers[notReady]), o.type === 'fatal' && o.skip === true);
  }
  const before = await commandStats(statConns);
  const cpuBefore = await serverCpuSeconds(statConns);
  for (const w of workers) tell(w.child, { type: 'go' });
  const outcomes = await Promise.all(workers.map((w) => w.result));
  const after = await commandStats(statConns);
  const cpuAfter = await serverCpuSeconds(statConns);
  const bad = outcomes.findIndex((r) => r.type !== 'result');
  if (bad >= 0) {
    const o = outcomes[bad];
    return fail(describe(o, workers[bad]), o.type === 'fatal' && o.skip === true);
  }
  await Promise.all(workers.map((w) => w.exited));
  clearTimeout(cap);

  const results = outcomes as WorkerResult[];
  if (def.spec.mode === 'seq') return splitBlocks(def, record, results[0]);
  record.ok = true;
  record.serverCommands = countsDelta(after, before);
  record.clientCpuUs = results.reduce((a, r) => a + r.cpuUs, 0);
  record.serverCpuUs = (cpuAfter - cpuBefore) * 1e6;
  record.timedOut = results.some((r) => r.timedOut);
  const startedAt = min(results.map((r) => r.startedAt));
  const endedAt = max(results.map((r) => r.endedAt));
  record.wallMs = endedAt - startedAt;
  record.done = results.reduce((a, r) => a + r.done, 0);
  record.rate = (record.done / record.wallMs) * 1000;
  for (const r of results) {
    addCounts(record.clientCommands, r.clientCommands);
    addCounts(record.failures, r.failures);
  }
  if (def.spec.mode === 'hot' || def.spec.mode === 'rw') {
    const waits = results.flatMap((r) => r.waits);
    record.waitP50 = percentile(waits, 50);
    record.waitP99 = percentile(waits, 99);
    record.waitMax = max(waits);
    const sections: Section[] = [];
    for (const r of results) {
      for (let i = 0; i * 3 < r.sections.length; i++) {
        sections.push({
          worker: r.sections[i * 3],
          enter: r.sections[i * 3 + 1],
          exit: r.sections[i * 3 + 2],
          segment: r.segments[i],
        });
      }
    }
    record.outOfOrder = outOfOrder(
      results.flatMap((r) =>
        r.sections
          .filter((_, i) => i % 3 === 1)
          .map((enter, i) => ({
            arrival: r.arrivals?.[i] ?? NaN,
            enter,
          })),
      ),
    );
    if (def.scenario === 'handoff') {
      record.handoff = handoffSplit(
        results.map((r) => ({
          proc: r.proc,
          sections: r.sections,
          released: r.released ?? [],
          heard: r.grantHeard ?? [],
        })),
      );
    }
    const s = streaks(sections);
    record.streakMax = s.max;
    record.streakMean = s.mean;
    const g = handoffGaps(sections);
    record.gapSameP50 = g.sameP50;
    record.gapOtherP50 = g.otherP50;
    record.otherShare = g.otherShare;
    const o = overlaps(sections);
    record.overlapCount = o.count;
    record.overlapMaxMs = o.maxMs;
    record.busyFraction = sections.reduce((a, x) => a + (x.exit - x.enter), 0) / record.wallMs;
    record.segmentsUsed = new Set(sections.map((x) => x.segment).filter((x) => x >= 0)).size;
    record.maxConcurrent = maxConcurrent(sections);
    if (def.spec.mode === 'rw') {
      const writeWaits = results.flatMap((r) => r.writeWaits ?? []);
      record.writes = writeWaits.length;
      record.writeWaitP99 = percentile(writeWaits, 99);
      // Overlapping reads are the point here: mutual exclusion is checked for writes only.
      record.overlapCount = writeOverlaps(
        sections,
        results.flatMap((r) => r.kinds ?? []),
      );
    }
  }
  if (def.spec.mode === 'mem') record.mem = results[0].mem;
  if (def.spec.mode === 'holds' || def.spec.mode === 'waiters') record.scale = results[0].scale;
  return [record];
}

/** A run's record before any result: not ok, nothing done. */
function blankRecord(id: string, run: number): RunRecord {
  return {
    id,
    run,
    ok: false,
    timedOut: false,
    wallMs: NaN,
    done: 0,
    rate: NaN,
    failures: {},
    clientCommands: {},
    serverCommands: {},
  };
}

/** A run that failed: a multi-peer job fails as a whole, every peer's summary gets the error. */
function failedRuns(def: CaseDef, run: number, why: string, skipped?: boolean): RunRecord[] {
  return def.peers.map((peer) => ({
    ...blankRecord(summaryId(def, peer), run),
    error: why,
    skipped,
  }));
}

/** The summary id of one peer of a job. */
export function summaryId(def: CaseDef, peer: PeerName): string {
  return def.peers.length > 1 ? `${def.id}:${peer}` : def.id;
}

/**
 * A seq job measured every peer in one process, in blocks; each peer gets its own record: the
 * median block rate, its commands, and its rate over the floor's in the same round.
 */
function splitBlocks(def: CaseDef, base: RunRecord, result: WorkerResult): RunRecord[] {
  const blocks = result.blocks ?? [];
  const rateOf = (b: { cycles: number; ms: number }) => (b.cycles / b.ms) * 1000;
  const floorByRound = new Map<number, number>();
  for (const b of blocks) if (b.peer === 'floor') floorByRound.set(b.round, rateOf(b));
  return def.peers.map((peer) => {
    const mine = blocks.filter((b) => b.peer === peer);
    const r: RunRecord = {
      ...base,
      id: summaryId(def, peer),
      ok: mine.length > 0,
      error: mine.length ? undefined : 'no blocks completed',
      timedOut: result.timedOut,
      wallMs: mine.reduce((a, b) => a + b.ms, 0),
      done: mine.reduce((a, b) => a + b.cycles, 0),
      rate: median(mine.map(rateOf)),
      failures: {},
      clientCommands: {},
      serverCommands: {},
      serverUsCommands: {},
      vsFloor: median(mine.map((b) => rateOf(b) / (floorByRound.get(b.round) ?? NaN))),
      cpuUsPerOp: median(mine.map((b) => b.cpuUs / b.cycles)),
      serverUsPerOp: median(mine.map((b) => (b.serverUs ?? NaN) / b.cycles)),
    };
    for (const b of mine) {
      addCounts(r.clientCommands, b.client);
      addCounts(r.serverCommands, b.server);
      addCounts(r.serverUsCommands!, b.serverUsBy ?? {});
    }
    return r;
  });
}

// ------------------------------------------------------------------ summary

export interface CaseSummary {
  def: CaseDef;
  n: number;
  skipped?: string;
  errors: string[];
  timedOut: boolean;
  rate: { median: number; min: number; max: number };
  /** seq: median of the per-run paired ratios to the floor (see RunRecord.vsFloor). */
  vsFloor?: number;
  waitP50: number;
  waitP99: { median: number; min: number; max: number };
  waitMax: number;
  streakMax: number;
  streakMean: number;
  gapSameP50: number;
  gapOtherP50: number;
  otherShare: number;
  cpuUsPerOp: number;
  /** seq: server µs per cycle on the commands the peer sent. */
  serverUsPerOp: number;
  /** hot: CPU µs per section of the worker processes / of redis; CPU used / (wall x vCPUs). */
  clientCpuPerOp: number;
  serverCpuPerOp: number;
  machineCpuShare: number;
  overlaps: number;
  overlapMaxMs: number;
  /** rw: medians over the runs of the writes' p99 wait and of the writes per run. */
  writeWaitP99: number;
  writes: number;
  /** The most sections at once in any run. */
  maxConcurrent: number;
  busyFraction: number;
  segmentsUsed: number;
  outOfOrder: number;
  /** handoff: medians over the runs of each part. */
  handoff?: HandoffSplit;
  scale?: (HoldsResult | WaitersResult)[];
  /** Failed acquires: total over the runs, and the attempts per run. */
  failures: Record<string, number>;
  attemptsPerRun: number;
  /** Per completed section/cycle, medians over the runs. */
  clientPerOp: number;
  clientByCommand: Record<string, number>;
  serverPerOp: number;
  serverByCommand: Record<string, number>;
  /** seq: server µs per cycle by command (a script's line includes what it ran). */
  serverUsByCommand: Record<string, number>;
  mem?: MemSample[][];
  runs: RunRecord[];
}

function perOp(records: RunRecord[], pick: (r: RunRecord) => CommandCounts) {
  const names = new Set(records.flatMap((r) => Object.keys(pick(r))));
  const by: Record<string, number> = {};
  for (const name of names) {
    by[name] = median(records.map((r) => (pick(r)[name] ?? 0) / Math.max(1, r.done)));
  }
  const total = median(
    records.map((r) => Object.values(pick(r)).reduce((a, b) => a + b, 0) / Math.max(1, r.done)),
  );
  return { total, by };
}

export function summarize(def: CaseDef, records: RunRecord[]): CaseSummary {
  const ok = records.filter((r) => r.ok);
  const skipped = records.find((r) => r.skipped)?.error;
  const m = (f: (r: RunRecord) => number | undefined) => median(ok.map((r) => f(r) ?? NaN));
  const rates = ok.map((r) => r.rate);
  const p99s = ok.map((r) => r.waitP99 ?? NaN);
  const failures: Record<string, number> = {};
  for (const r of ok) addCounts(failures, r.failures);
  const client = perOp(ok, (r) => r.clientCommands);
  const server = perOp(ok, (r) => r.serverCommands);
  const serverUs = perOp(ok, (r) => r.serverUsCommands ?? {});
  const attempts = def.procs * def.spec.concurrency * def.spec.iterations;
  return {
    def,
    n: ok.length,
    skipped,
    errors: records.filter((r) => !r.ok && !r.skipped).map((r) => r.error ?? 'unknown'),
    timedOut: ok.some((r) => r.timedOut),
    rate: { median: median(rates), min: min(rates), max: max(rates) },
    vsFloor: def.spec.mode === 'seq' ? m((r) => r.vsFloor) : undefined,
    waitP50: m((r) => r.waitP50),
    waitP99: { median: median(p99s), min: min(p99s), max: max(p99s) },
    waitMax: m((r) => r.waitMax),
    streakMax: m((r) => r.streakMax),
    streakMean: m((r) => r.streakMean),
    gapSameP50: m((r) => r.gapSameP50),
    gapOtherP50: m((r) => r.gapOtherP50),
    otherShare: m((r) => r.otherShare),
    cpuUsPerOp: m((r) => r.cpuUsPerOp),
    serverUsPerOp: m((r) => r.serverUsPerOp),
    clientCpuPerOp: m((r) => (r.clientCpuUs ?? NaN) / r.done),
    serverCpuPerOp: m((r) => (r.serverCpuUs ?? NaN) / r.done),
    machineCpuShare: m(
      (r) => ((r.clientCpuUs ?? NaN) + (r.serverCpuUs ?? NaN)) / 1000 / r.wallMs / os.cpus().length,
    ),
    overlaps: ok.reduce((a, r) => a + (r.overlapCount ?? 0), 0),
    overlapMaxMs: max(ok.map((r) => r.overlapMaxMs ?? 0)),
    writeWaitP99: m((r) => r.writeWaitP99),
    writes: m((r) => r.writes),
    maxConcurrent: max(ok.map((r) => r.maxConcurrent ?? NaN)),
    busyFraction: m((r) => r.busyFraction),
    segmentsUsed: m((r) => r.segmentsUsed),
    outOfOrder: m((r) => r.outOfOrder),
    handoff: ok.some((r) => r.handoff)
      ? (Object.fromEntries(
          Object.keys(ok.find((r) => r.handoff)!.handoff!).map((k) => [
            k,
            m((r) => r.handoff?.[k as keyof HandoffSplit]),
          ]),
        ) as unknown as HandoffSplit)
      : undefined,
    scale: ok.some((r) => r.scale) ? ok.map((r) => r.scale!).filter(Boolean) : undefined,
    failures,
    attemptsPerRun:
      def.spec.mode === 'hot' || def.spec.mode === 'rw'
        ? attempts
        : def.spec.mode === 'holds' || def.spec.mode === 'waiters'
          ? (def.spec.count ?? 0)
          : def.spec.mode === 'seq'
            ? def.spec.iterations * def.spec.block
            : def.spec.iterations,
    clientPerOp: client.total,
    clientByCommand: client.by,
    serverPerOp: server.total,
    serverByCommand: server.by,
    serverUsByCommand: serverUs.by,
    mem: ok.some((r) => r.mem) ? ok.map((r) => r.mem ?? []) : undefined,
    runs: records,
  };
}

// ------------------------------------------------------------------ the replica

/** Bound on a replica becoming online on the master (full sync included), and on detaching. */
const REPLICA_ONLINE_TIMEOUT_MS = 30_000;
const REPLICA_DETACH_TIMEOUT_MS = 10_000;

interface Replica {
  server: RedisProcess;
  conn: Redis;
  /** Its --dir (a temp dir: nothing should be written there, syncs are diskless both ways). */
  dir: string;
}

/**
 * A 4th redis-server for the 1 server + 1 replica case. It is a replica of server 0 only while
 * that case runs (`attachReplica` / `detachReplica`), so every other case still measures
 * server 0 without one. Full syncs go over the socket on both sides (the master sends the RDB
 * at once instead of after Redis 7's 5 s delay), so nothing is written in the working directory.
 */
async function startReplica(binary: string, master: Redis): Promise<Replica> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nest-locked-bench-replica-'));
  let server: RedisProcess;
  try {
    server = await startRedis(binary, ['--dir', dir, '--repl-diskless-load', 'swapdb']);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const conn = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 });
  await master.config('SET', 'repl-diskless-sync', 'yes');
  await master.config('SET', 'repl-diskless-sync-delay', '0');
  return { server, conn, dir };
}

/** The `slaveN:` line of the master's INFO replication for the replica on `port`, if any. */
export function replicaLine(info: string, port: number): string | undefined {
  return info.split(/\r?\n/).find((l) => /^slave\d+:/.test(l) && l.includes(`port=${port},`));
}

/** REPLICAOF server 0, then waits (bounded) until the master lists the replica as online. */
async function attachReplica(replica: Replica, master: Redis, masterPort: number): Promise<void> {
  await replica.conn.replicaof('127.0.0.1', masterPort);
  const deadline = Date.now() + REPLICA_ONLINE_TIMEOUT_MS;
  for (;;) {
    const line = replicaLine(await master.info('replication'), replica.server.port);
    if (line?.includes('state=online')) return;
    if (Date.now() > deadline) {
      throw new Error(
        `replica 127.0.0.1:${replica.server.port} not online on 127.0.0.1:${masterPort} within ` +
          `${REPLICA_ONLINE_TIMEOUT_MS} ms (${line ?? 'not listed'})`,
      );
    }
    await sleep(50);
  }
}

/**
 * REPLICAOF NO ONE, then waits (bounded) until the master no longer lists it. Throws otherwise:
 * a replica left attached would silently change every later case on server 0.
 */
async function detachReplica(replica: Replica, master: Redis): Promise<void> {
  await replica.conn.replicaof('NO', 'ONE');
  const deadline = Date.now() + REPLICA_DETACH_TIMEOUT_MS;
  while (replicaLine(await master.info('replication'), replica.server.port)) {
    if (Date.now() > deadline) {
      throw new Error(
        `replica 127.0.0.1:${replica.server.port} still attached after REPLICAOF NO ONE`,
      );
    }
    await sleep(50);
  }
}

/** One run of a replica case: attach, run, detach; an attach that fails is the run's error. */
async function runWithReplica(
  def: CaseDef,
  run: number,
  servers: RedisProcess[],
  conns: Redis[],
  replica: Replica,
): Promise<RunRecord[]> {
  try {
    await attachReplica(replica, conns[0], servers[0].port);
  } catch (err) {
    await detachReplica(replica, conns[0]);
    return failedRuns(def, run, String((err as Error)?.message ?? err));
  }
  try {
    return await runCase(def, run, servers, conns);
  } finally {
    await detachReplica(replica, conns[0]);
  }
}

// ------------------------------------------------------------------ main

/** The version in this repository's package.json. */
function ownVersion(): string {
  const file = path.join(ROOT, 'package.json');
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
}

function versionOf(pkg: string): string {
  try {
    const file = path.join(ROOT, 'node_modules', pkg, 'package.json');
    return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

function progress(i: number, total: number, def: CaseDef, rs: RunRecord[]): string {
  const head = `[${String(i).padStart(3)}/${total}] ${def.id} #${rs[0].run}`;
  const one = (r: RunRecord) => {
    if (!r.ok) return `${r.skipped ? 'SKIPPED' : 'ERROR'} ${r.error?.split('\n')[0]}`;
    const cmds = Object.values(r.clientCommands).reduce((a, b) => a + b, 0) / Math.max(1, r.done);
    const parts = [`${fmt(r.rate)}/s`, `${fmt(cmds, 2)} cmds/op`];
    if (r.vsFloor !== undefined && def.peers.length > 1) parts.push(`${fmt(r.vsFloor, 2)} x floor`);
    if (r.waitP99 !== undefined) parts.push(`p99 ${fmt(r.waitP99, 1)} ms`);
    const failed = Object.values(r.failures).reduce((a, b) => a + b, 0);
    if (failed) parts.push(`${failed} failed`);
    if (r.timedOut) parts.push('TIME BUDGET HIT');
    return parts.join(', ');
  };
  if (rs.length === 1) return `${head}: ${one(rs[0])}`;
  if (!rs[0].ok && rs.every((r) => r.error === rs[0].error)) return `${head}: ${one(rs[0])}`;
  return [head, ...rs.map((r) => `      ${r.id.split(':').pop()}: ${one(r)}`)].join('\n');
}

async function main(): Promise<void> {
  const wallStart = Date.now();
  const loadStart = os.loadavg();
  const options = parseArgs(process.argv.slice(2));
  // Every backend side by side: its own servers, one at a time (bench/backends/).
  const backends = () =>
    runBackends({
      rounds: options.quick ? 3 : 5,
      cycles: options.quick ? 1_000 : 3_000,
      roundMs: 3_000,
      hotIterations: options.quick ? 10 : 20,
      out: options.out,
    });
  if (options.only.length === 1 && options.only[0] === 'backends') {
    await backends();
    return;
  }
  const cases = buildCases(options);
  const servers: RedisProcess[] = [];
  const conns: Redis[] = [];
  let replica: Replica | undefined;

  const cleanup = () => {
    for (const c of live) killChild(c);
    killAllStartedSync();
    if (replica) fs.rmSync(replica.dir, { recursive: true, force: true });
    removeSnapshot();
  };
  process.on('exit', cleanup);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      cleanup();
      process.exit(130);
    });
  }

  try {
    takeSnapshot(options.lib);
    const redisBin = ensureRedisServer((line) => console.log(line));
    for (let i = 0; i < 3; i++) servers.push(await startRedis(redisBin));
    for (const s of servers) {
      conns.push(new Redis({ host: '127.0.0.1', port: s.port, maxRetriesPerRequest: 1 }));
    }
    if (cases.some((c) => c.replica)) replica = await startReplica(redisBin, conns[0]);
    const redisVersion = /redis_version:(\S+)/.exec(await conns[0].info('server'))?.[1] ?? '?';
    console.log(
      `nest-locked bench: ${cases.length} cases, runs ${options.runs}, redis ${redisVersion} ` +
        `on ports ${servers.map((s) => s.port).join(', ')}` +
        (replica ? ` (replica of ${servers[0].port} on ${replica.server.port})` : ''),
    );

    const total = cases.reduce((a, c) => a + c.runs, 0);
    const records = new Map<string, RunRecord[]>();
    for (const c of cases) for (const p of c.peers) records.set(summaryId(c, p), []);
    let i = 0;
    const maxRuns = Math.max(...cases.map((c) => c.runs));
    // Rounds interleave the peers, so slow drift of the machine hits every peer alike.
    for (let run = 1; run <= maxRuns; run++) {
      for (const def of cases) {
        if (run > def.runs) continue;
        // A scenario that cannot run on this build (segments) is tried once, not every round.
        if (records.get(summaryId(def, def.peers[0]))!.some((r) => r.skipped)) continue;
        const rs = def.replica
          ? await runWithReplica(def, run, servers, conns, replica!)
          : await runCase(def, run, servers, conns);
        for (const r of rs) records.get(r.id)!.push(r);
        console.log(progress(++i, total, def, rs));
      }
    }

    const summaries = cases.flatMap((c) =>
      c.peers.map((peer) =>
        summarize(
          { ...c, id: summaryId(c, peer), peer, peers: [peer] },
          records.get(summaryId(c, peer))!,
        ),
      ),
    );
    const lockOrderMemory = options.only.includes('lockorder')
      ? await measureLockOrderMemory(options.quick ? 5_000 : 20_000)
      : undefined;
    const files = writeReport(options.out, summaries, {
      lockOrderMemory,
      date: new Date().toISOString(),
      wallMs: Date.now() - wallStart,
      argv: process.argv.slice(2),
      options,
      load: { start: loadStart, end: os.loadavg() },
      machine: `${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}, ${Math.round(os.totalmem() / 2 ** 30)} GB, ${os.type()} ${os.release()}`,
      versions: {
        node: process.version,
        redis: redisVersion,
        ioredis: versionOf('ioredis'),
        redlock: versionOf('redlock'),
        'redis-semaphore': versionOf('redis-semaphore'),
        '@anchan828/nest-redlock': versionOf('@anchan828/nest-redlock'),
        '@nestjs/core': versionOf('@nestjs/core'),
        'nest-locked': ownVersion(),
      },
    });
    console.log(`\n${fs.readFileSync(files.md, 'utf8')}`);
    if (options.only.includes('backends')) await backends();
    console.log(`wrote ${files.md}, ${files.json}, ${files.svg}`);
    console.log(`wall time ${((Date.now() - wallStart) / 1000).toFixed(1)} s`);
  } finally {
    await Promise.all(conns.map((c) => c.quit().catch(() => c.disconnect())));
    if (replica) {
      const { conn, server, dir } = replica;
      await conn.quit().catch(() => conn.disconnect());
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    await Promise.all(servers.map((s) => s.stop()));
    removeSnapshot();
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
