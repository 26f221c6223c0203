import { randomBytes } from 'node:crypto';
import { checkHistory, type HistoryInput, type HistoryReport } from 'nest-locked/testing';
import type { HistoryWorkerConfig, HistoryWorkerLine } from '../../fixtures/history-worker';
import { now } from '../intervals';
import { within } from '../lock-app';
import { spawnWorker, type Worker } from '../workers';
import { faultSchedule, type PlannedFault, type PlannedFaultKind } from './fault-schedule';
import { HistoryRecorder } from './history-recorder';
import { HISTORY_TTL, type HistoryTarget } from './history-targets';

export interface HistoryRunOptions {
  readonly seed: number;
  /** How long the workers call, faults included. */
  readonly durationMs: number;
  /** Worker processes at once (default 3); a killed one is replaced. */
  readonly workers?: number;
  /** Loops per key in each worker (default 2: a process hands the lock to its own callers too). */
  readonly callers?: number;
  readonly keys?: readonly string[];
  /** The faults to draw from (default every kind the target takes). */
  readonly kinds?: readonly PlannedFaultKind[];
  /** Progress lines (the schedule, each fault as it happens). */
  readonly log?: (line: string) => void;
}

export interface HistoryRun {
  readonly target: string;
  readonly seed: number;
  readonly schedule: readonly PlannedFault[];
  readonly input: HistoryInput;
  readonly report: HistoryReport;
  /** Failed calls by error name. */
  readonly errors: Readonly<Record<string, number>>;
  /** Workers that exited on their own with a code other than 0 (crashes), with their output. */
  readonly crashes: readonly string[];
  /** Faults the run could not inject, with why. */
  readonly injectFailures: readonly string[];
  readonly ms: number;
}

type HistoryWorker = Worker<HistoryWorkerLine>;

const READY_MS = 60_000;
const STOP_MS = 30_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * One seeded history on `target`: `workers` processes call `@Locked` sections while the
 * schedule's faults hit the holders and the servers; then every worker is stopped and the
 * history checked. Every wait is bounded; every process started here is stopped here.
 */
export async function runHistory(
  target: HistoryTarget,
  options: HistoryRunOptions,
): Promise<HistoryRun> {
  const log = options.log ?? (() => undefined);
  const config: HistoryWorkerConfig = {
    backend: target.backend,
    keyPrefix: `hist-${options.seed}-${randomBytes(3).toString('hex')}`,
    keys: [...(options.keys ?? ['a'])],
    callers: options.callers ?? 2,
    ttl: HISTORY_TTL,
    waitTimeout: 3_000,
    delayMs: 2,
    pauseMs: 100,
    timeoutMs: options.durationMs + 180_000,
  };
  const recorder = new HistoryRecorder();
  const crashes: string[] = [];
  const injectFailures: string[] = [];
  const live = new Map<number, HistoryWorker>();
  const killed = new Set<number>();

  const spawnOne = async (): Promise<HistoryWorker> => {
    const w = spawnWorker<HistoryWorkerConfig, HistoryWorkerLine>(config, 'history-worker');
    live.set(w.pid, w);
    w.onLine((line) => {
      const answer = recorder.hear(w.pid, line);
      if (answer !== undefined) w.send(answer);
    });
    void w.exited.then((r) => {
      live.delete(w.pid);
      recorder.gone(w.pid);
      if (!killed.has(w.pid) && r.code !== 0)
        crashes.push(`worker ${w.pid} exit ${r.code ?? r.signal}: ${r.other.slice(-1_000)}`);
    });
    await within(w.ready, READY_MS, `history worker ${w.pid}`);
    return w;
  };

  /** A worker that holds a lock now (waiting up to 500 ms for one), else any. */
  const holder = async (pick: number): Promise<HistoryWorker | undefined> => {
    for (let waited = 0; waited < 500; waited += 5) {
      const pids = [...live.keys()].filter((pid) => recorder.holds(pid));
      if (pids.length > 0) return live.get(pids[Math.floor(pick * pids.length)]);
      await sleep(5);
    }
    const all = [...live.values()];
    return all[Math.floor(pick * all.length)];
  };

  const replacements: Promise<unknown>[] = [];
  const inject = async (fault: PlannedFault): Promise<void> => {
    if (fault.kind === 'holder-frozen-long' || fault.kind === 'holder-frozen-brief') {
      const w = await holder(fault.pick);
      if (!w) return;
      const from = now();
      process.kill(w.pid, 'SIGSTOP');
      try {
        await sleep(fault.ms);
      } finally {
        process.kill(w.pid, 'SIGCONT');
      }
      recorder.faults.push({
        kind: 'process-frozen',
        process: w.pid,
        from,
        to: now(),
        source: fault.kind,
      });
    } else if (fault.kind === 'holder-killed') {
      const w = await holder(fault.pick);
      if (!w) return;
      killed.add(w.pid);
      const at = now();
      w.kill();
      recorder.faults.push({ kind: 'process-killed', process: w.pid, from: at, to: at });
      replacements.push(spawnOne().then((fresh) => fresh.go()));
    } else {
      recorder.faults.push(...(await target.inject(fault)));
    }
  };

  const schedule = faultSchedule(options.seed, {
    durationMs: options.durationMs,
    lease: Number.isFinite(target.lease) ? target.lease : HISTORY_TTL,
    kinds: options.kinds ?? target.kinds,
  });
  const started = now();
  try {
    const first = await Promise.all(Array.from({ length: options.workers ?? 3 }, spawnOne));
    first.forEach((w) => w.go());
    const t0 = now();
    for (const fault of schedule) {
      const wait = t0 + fault.at - now();
      if (wait > 0) await sleep(wait);
      log(`${Math.round(now() - t0)} ms: ${fault.kind}${fault.ms ? ` ${fault.ms} ms` : ''}`);
      await inject(fault).catch((err: unknown) => {
        injectFailures.push(`${fault.kind}: ${err instanceof Error ? err.message : String(err)}`);
      });
    }
    const left = t0 + options.durationMs - now();
    if (left > 0) await sleep(left);
    await Promise.allSettled(replacements);
  } finally {
    await stopWorkers([...live.values()]);
  }
  const { events, faults, store, errors } = recorder;
  const input: HistoryInput = {
    events,
    faults,
    writes: store.writes,
    lease: target.lease,
    counter: { increments: store.increments, value: store.value },
    end: now(),
  };
  return {
    target: target.name,
    seed: options.seed,
    schedule,
    input,
    report: checkHistory(input),
    errors,
    crashes,
    injectFailures,
    ms: now() - started,
  };
}

/** Asks every worker to stop (resumed first), and kills those that have not exited in time. */
async function stopWorkers(workers: HistoryWorker[]): Promise<void> {
  for (const w of workers) {
    try {
      process.kill(w.pid, 'SIGCONT');
    } catch {
      // Gone already.
    }
    w.send('stop');
  }
  await within(Promise.all(workers.map((w) => w.exited)), STOP_MS, 'the history workers').catch(
    () => workers.forEach((w) => w.kill()),
  );
  await Promise.all(workers.map((w) => w.exited));
}
