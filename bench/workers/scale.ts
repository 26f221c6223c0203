/**
 * The two scale scenarios of a benchmark worker: many holds at once in one process (`holds`)
 * and a long line of waiters on one key (`waiters`). Both sample heap, event-loop delay and the
 * commands sent once a second (no forced gc while sampling: a forced gc would be the delay).
 */
import {
  monitorEventLoopDelay,
  performance,
  PerformanceObserver,
  type IntervalHistogram,
} from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type {
  CommandCounts,
  HoldsResult,
  TimeSample,
  WaitersResult,
  WorkerResult,
  WorkerSpec,
} from '../protocol';
import { commandCounter, type Held, type Peer, SkipError } from './peers';

/** CLOCK_MONOTONIC in ms (the same clock as the worker's). */
const now = () => Number(process.hrtime.bigint()) / 1e6;
const total = (c: CommandCounts) => Object.values(c).reduce((a, b) => a + b, 0);
/** Sampling interval of the event-loop delay histograms, ms. */
const RESOLUTION_MS = 5;
/** A histogram value as delay, ms: Node records whole intervals, resolution included. */
const ms = (ns: number) => Math.max(0, ns / 1e6 - RESOLUTION_MS);

/** Heap used after two full collections (the worker runs with --expose-gc). */
function collectedHeap(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('the scale scenarios need --expose-gc');
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** A sample of heap, event-loop delay and commands every `everyMs`, from `start()` on. */
class Sampler {
  readonly samples: TimeSample[] = [];
  private readonly interval: IntervalHistogram = monitorEventLoopDelay({
    resolution: RESOLUTION_MS,
  });
  private timer?: NodeJS.Timeout;
  private t0 = 0;
  private lastCommands = 0;

  constructor(private readonly everyMs = 1000) {}

  start(): void {
    this.t0 = now();
    this.lastCommands = total(commandCounter.counts);
    this.interval.enable();
    this.timer = setInterval(() => this.take(), this.everyMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.take();
    this.interval.disable();
  }

  private take(): void {
    const commands = total(commandCounter.counts);
    this.samples.push({
      t: now() - this.t0,
      heapUsed: process.memoryUsage().heapUsed,
      loopP99: ms(this.interval.percentile(99)),
      loopMax: ms(this.interval.max),
      commands: commands - this.lastCommands,
    });
    this.lastCommands = commands;
    this.interval.reset();
  }
}

/** Lock keys of this run still in Redis (fence counters, which outlive a lock, not counted). */
async function leftInRedis(ports: number[], key: string): Promise<number> {
  let left = 0;
  for (const port of ports) {
    const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
    try {
      let cursor = '0';
      do {
        const [next, keys] = await c.scan(cursor, 'MATCH', `*${key}*`, 'COUNT', 1000);
        cursor = next;
        left += keys.filter((k) => !k.endsWith(':fence')).length;
      } while (cursor !== '0');
    } finally {
      await c.quit().catch(() => c.disconnect());
    }
  }
  return left;
}

/** Runs `fn(i)` for i in 0..n-1 with at most `concurrency` in flight; stops at `stopAt`. */
async function pool(
  n: number,
  concurrency: number,
  stopAt: number,
  fn: (i: number) => Promise<void>,
): Promise<boolean> {
  let next = 0;
  let timedOut = false;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        if (now() > stopAt) {
          timedOut = true;
          return;
        }
        await fn(next++);
      }
    }),
  );
  return timedOut;
}

/**
 * `count` distinct keys taken (256 at a time) and held at once for `holdMs`, renewed by the
 * peer (ours: the watchdog, ttl `spec.ttl`), then all released. Heap per hold from collected
 * heaps before and with every hold; renewal traffic and event-loop delay over the hold phase.
 */
export async function runHolds(peer: Peer, spec: WorkerSpec, r: WorkerResult): Promise<void> {
  if (!peer.hold) throw new SkipError(`${spec.peer} cannot keep a lock (no hold)`);
  const count = spec.count ?? 100_000;
  const holdMs = spec.holdMs ?? 30_000;
  const stopAt = now() + spec.budgetMs;
  const held: Held[] = new Array<Held>(count);
  const failures = r.failures;
  const heapBefore = collectedHeap();
  const sampler = new Sampler();
  r.startedAt = now();
  sampler.start();
  const timedOut = await pool(count, spec.concurrency, stopAt, async (i) => {
    try {
      held[i] = await peer.hold!(`${spec.key}:h:${i}`, { ttl: spec.ttl, waitTimeout: 0 });
    } catch (err) {
      const name = err instanceof Error ? err.name : 'unknown';
      failures[name] = (failures[name] ?? 0) + 1;
    }
  });
  const acquireMs = now() - r.startedAt;
  const heapHeld = collectedHeap();
  const taken = held.filter(Boolean);
  // The hold phase: renewals only.
  const phase = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  const before = { ...commandCounter.counts };
  const phaseStart = now();
  phase.enable();
  await sleep(Math.max(0, Math.min(holdMs, stopAt - now())));
  phase.disable();
  const holdPhaseMs = now() - phaseStart;
  const commandsInHold: CommandCounts = {};
  for (const [name, n] of Object.entries(commandCounter.counts)) {
    const d = n - (before[name] ?? 0);
    if (d > 0) commandsInHold[name] = d;
  }
  const lost = taken.filter((h) => h.lost()).length;
  const releaseStart = now();
  let releaseFailures = 0;
  await pool(taken.length, spec.concurrency, Infinity, async (i) => {
    await taken[i].release().catch(() => releaseFailures++);
  });
  const releaseMs = now() - releaseStart;
  r.done = taken.length;
  r.endedAt = now();
  sampler.stop();
  const lostCount = lost;
  const takenCount = taken.length;
  // The bench's own references go first: what is left after the release is the library's.
  held.length = 0;
  taken.length = 0;
  const heapAfter = collectedHeap();
  const result: HoldsResult = {
    kind: 'holds',
    count,
    taken: takenCount,
    ttl: spec.ttl,
    holdMs,
    acquireMs,
    heapBefore,
    heapHeld,
    heapAfter,
    holdPhaseMs,
    commandsInHold,
    loopP50: ms(phase.percentile(50)),
    loopP99: ms(phase.percentile(99)),
    loopMax: ms(phase.max),
    lost: lostCount,
    releaseMs,
    releaseFailures,
    leftInRedis: await leftInRedis(spec.ports, spec.key),
    samples: sampler.samples,
  };
  r.scale = result;
  r.timedOut = timedOut;
}

/** Every 10th waiter waits this long only: it must time out in the line, and nothing else. */
const SHORT_WAIT_MS = 200;

/** Lines a tenth as long drained before the long one, each timed whole. */
const SHORT_LINES = 5;

/**
 * A line on a key of its own, beside the timed one: one holder, `n` callers queued behind it
 * (every 10th waits `shortWaitMs` only and times out in the line), then drained. Returns the
 * drain's ms per grant (release of the holder to the last caller done, GC included) and, with
 * `weigh`, collected heaps before the callers queue and once they are in line (else NaN).
 *
 * Before the timed line, short ones compile the paths of queueing, handing over and timing out
 * (a cold process spent the first tenth of the line in JIT), lines a tenth as long give the grant
 * cost of a shorter line, and a weighed one of the same length gives the heap per waiter. Not the
 * timed line itself: a forced full collection just before a drain made its first three tenths
 * 2-3x slower than the rest (0.021 vs 0.010 ms per grant), a cost of the weighing, not of the
 * line.
 */
async function sideLine(
  peer: Peer,
  key: string,
  n: number,
  ttl: number,
  shortWaitMs: number,
  weigh = false,
): Promise<{ heapBefore: number; heapQueued: number; msPerGrant: number }> {
  const holder = await peer.hold!(key, { ttl, waitTimeout: 0 });
  const heapBefore = weigh ? collectedHeap() : NaN;
  let granted = 0;
  const calls = Array.from({ length: n }, (_, i) =>
    peer.hold!(key, { ttl, waitTimeout: i % 10 === 9 ? shortWaitMs : 60_000 }).then(
      (h) => {
        granted++;
        return h.release();
      },
      () => undefined,
    ),
  );
  await sleep(50);
  const heapQueued = weigh ? collectedHeap() : NaN;
  // The short waits run out while the key is still held: the drain grants only.
  await sleep(shortWaitMs * 2);
  const drainStart = now();
  await holder.release();
  await Promise.all(calls);
  return { heapBefore, heapQueued, msPerGrant: (now() - drainStart) / Math.max(1, granted) };
}

/**
 * One holder, then `count` callers queued on the same key (every 10th with a short wait that
 * runs out while it is in the line); heap per waiter from collected heaps; then the holder
 * releases and every caller takes and releases the key in turn. Order, grant cost along the
 * line, and what is left in Redis afterwards.
 */
export async function runWaiters(peer: Peer, spec: WorkerSpec, r: WorkerResult): Promise<void> {
  if (!peer.hold) throw new SkipError(`${spec.peer} cannot keep a lock (no hold)`);
  const count = spec.count ?? 10_000;
  const key = `${spec.key}:line`;
  // Two lines of a fifth of the length (at most 2,000) on keys of their own: the long line's
  // paths (passes in memory that wait for a refill of a large block, timeouts in the line) are
  // compiled before the timed line, whose first tenth otherwise measured the JIT.
  const warm = Math.min(2_000, Math.ceil(count / 5));
  for (const n of [1, 2]) await sideLine(peer, `${spec.key}:warm${n}`, warm, spec.ttl, 20);
  // Grant cost as the line grows: whole drains of lines a tenth as long (GC included, as in the
  // long line's), to set beside the long line's own ms per grant.
  const shortLine = Math.ceil(count / 10);
  const shortLineMsPerGrant: number[] = [];
  for (let n = 0; n < SHORT_LINES; n++) {
    const line = await sideLine(peer, `${spec.key}:short${n}`, shortLine, spec.ttl, 20);
    shortLineMsPerGrant.push(line.msPerGrant);
  }
  const weighed = await sideLine(peer, `${spec.key}:weigh`, count, spec.ttl, SHORT_WAIT_MS, true);
  const { heapBefore, heapQueued } = weighed;
  const holder = await peer.hold(key, { ttl: spec.ttl, waitTimeout: 0 });
  const enterOrder: number[] = [];
  const enterAt: number[] = [];
  let timedOut = 0;
  let shortWaits = 0;
  const otherErrors: Record<string, number> = {};
  const sampler = new Sampler(250);
  r.startedAt = now();
  sampler.start();
  const calls: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const short = i % 10 === 9;
    if (short) shortWaits++;
    const waitTimeout = short ? SHORT_WAIT_MS : Math.max(60_000, spec.budgetMs);
    calls.push(
      peer.hold(key, { ttl: spec.ttl, waitTimeout }).then(
        (h) => {
          enterOrder.push(i);
          enterAt.push(now());
          return h.release();
        },
        (err: unknown) => {
          const name = err instanceof Error ? err.name : 'unknown';
          if (short && name === 'LockNotAcquiredError') timedOut++;
          else otherErrors[name] = (otherErrors[name] ?? 0) + 1;
        },
      ),
    );
  }
  // Every call reaches the line, and the short waits run out while the key is still held.
  await sleep(50 + SHORT_WAIT_MS * 2);
  // GC pauses during the drain, to show with the grant cost of each tenth.
  const pauses: [number, number][] = [];
  const gcWatch = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) pauses.push([e.startTime, e.duration]);
  });
  gcWatch.observe({ entryTypes: ['gc'] });
  // GC entries are on the performance.now() clock; this file's now() is hrtime's.
  const clockOffset = now() - performance.now();
  const cpu = process.cpuUsage();
  const drainStart = now();
  await holder.release();
  await Promise.race([Promise.all(calls), sleep(Math.max(1, spec.budgetMs))]);
  const drainMs = now() - drainStart;
  const used = process.cpuUsage(cpu);
  r.endedAt = now();
  sampler.stop();
  // Grant cost along the line: mean ms between consecutive grants in 10 slices.
  const granted = enterOrder.length;
  gcWatch.disconnect();
  const grantMsBySlice: number[] = [];
  const lineAtSlice: number[] = [];
  const gcMsBySlice: number[] = [];
  for (let s = 0; s < 10; s++) {
    const a = Math.floor((s * granted) / 10);
    const b = Math.floor(((s + 1) * granted) / 10);
    if (b - a < 2) continue;
    grantMsBySlice.push((enterAt[b - 1] - enterAt[a]) / (b - 1 - a));
    lineAtSlice.push(granted - a);
    const from = enterAt[a];
    const to = enterAt[b - 1];
    gcMsBySlice.push(
      pauses
        .filter(([t]) => t + clockOffset >= from && t + clockOffset < to)
        .reduce((sum, [, ms]) => sum + ms, 0),
    );
  }
  // FIFO: a caller that entered before one that arrived earlier (callers arrive in index order).
  const rank = new Map<number, number>();
  enterOrder.forEach((caller, k) => rank.set(caller, k));
  let outOfOrder = 0;
  let latest = -1;
  for (let i = 0; i < count; i++) {
    const k = rank.get(i);
    if (k === undefined) continue;
    if (latest > k) outOfOrder++;
    latest = Math.max(latest, k);
  }
  r.done = granted;
  await sleep(100);
  const result: WaitersResult = {
    kind: 'waiters',
    count,
    shortWaits,
    heapBefore,
    heapQueued,
    granted,
    timedOut,
    otherErrors,
    outOfOrder,
    grantMsBySlice,
    lineAtSlice,
    gcMsBySlice,
    drainMs,
    shortLine,
    shortLineMsPerGrant,
    cpuUsPerGrant: (used.user + used.system) / Math.max(1, granted),
    leftInRedis: await leftInRedis(spec.ports, spec.key),
    loopP99: Math.max(0, ...sampler.samples.map((x) => x.loopP99)),
    samples: sampler.samples,
  };
  r.scale = result;
}
