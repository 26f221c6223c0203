import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { type LockHandle, LockService, type RedlockModuleOptions } from 'nest-locked';
import type { FaultLine, FaultWorkerConfig } from '../fixtures/fault-worker';
import { createLockApp, within } from './lock-app';
import { now } from './intervals';
import { type RedisServerHandle, startRedisServer, stopAll } from './redis-server';
import { killWorkers, spawnWorker, type Worker } from './workers';

/**
 * Frame and helpers of the fault suite (test/faults): everything a file starts is recorded here
 * and stopped in its `afterAll` (frozen servers and workers resumed first, so they can exit),
 * every wait is bounded.
 */

export type FaultWorker = Worker<FaultLine>;

/** Everything one spec file started; `stopAll()` in `afterAll`. */
export class FaultFrame {
  readonly servers: RedisServerHandle[] = [];
  readonly apps: INestApplication[] = [];
  readonly clients: Redis[] = [];
  readonly workers: FaultWorker[] = [];
  readonly stoppers: (() => Promise<void>)[] = [];
  readonly dirs: string[] = [];

  track<T extends RedisServerHandle>(server: T): T {
    this.servers.push(server);
    return server;
  }

  async app(options: RedlockModuleOptions): Promise<INestApplication> {
    const app = await createLockApp({ options });
    this.apps.push(app);
    return app;
  }

  /** A plain ioredis client that fails fast instead of queueing while its server is down. */
  raw(server: { url: string }): Redis {
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    this.clients.push(client);
    return client;
  }

  worker(config: FaultWorkerConfig): FaultWorker {
    const worker = spawnWorker<FaultWorkerConfig, FaultLine>(config, 'fault-worker');
    this.workers.push(worker);
    return worker;
  }

  /** A fresh temporary directory, removed in `stopAll`. */
  tmpDir(name: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `nest-locked-faults-${name}-`));
    this.dirs.push(dir);
    return dir;
  }

  async stopAll(): Promise<void> {
    // Resume anything a failed test left frozen, so it can close and exit.
    for (const s of this.servers) if (s.pid !== undefined) s.kill('SIGCONT');
    for (const w of this.workers) resumeProcess(w.pid);
    await killWorkers();
    await Promise.all(
      this.apps.map((a) => within(a.close(), 10_000, 'app.close()').catch(() => undefined)),
    );
    for (const c of this.clients) c.disconnect();
    for (const stop of this.stoppers) await stop().catch(() => undefined);
    await stopAll(this.servers);
    for (const dir of this.dirs) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** SIGCONT to a process we started (a worker), ignoring one that is gone. */
export function resumeProcess(pid: number): void {
  try {
    process.kill(pid, 'SIGCONT');
  } catch {
    // Already exited.
  }
}

/**
 * Whether the process is stopped (state T in /proc): SIGSTOP lands only when the process is
 * next scheduled, so a test waits for this rather than for a fixed time.
 */
export function processStopped(pid: number): boolean {
  try {
    // The state follows the command name in parentheses, which may itself hold spaces.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'T';
  } catch {
    return false;
  }
}

/** Sends `signal` to a worker we started. */
export function signalProcess(pid: number, signal: NodeJS.Signals): void {
  process.kill(pid, signal);
}

/**
 * One redis-server started for `frame`, a raw client on it and `count` apps over it (each with
 * `options` and `clients: [server.url]`), their LockServices in order.
 */
export async function singleNodeApps(
  frame: FaultFrame,
  count: number,
  options: Omit<RedlockModuleOptions, 'clients'>,
): Promise<{ server: RedisServerHandle; raw: Redis; services: LockService[] }> {
  const server = frame.track(await startRedisServer());
  const raw = frame.raw(server);
  const services: LockService[] = [];
  for (let i = 0; i < count; i++) {
    services.push((await frame.app({ ...options, clients: [server.url] })).get(LockService));
  }
  return { server, raw, services };
}

export const uid = (): string => randomBytes(4).toString('hex');

/** Ms of the machine's monotonic clock, comparable with the workers' times (intervals' `now`). */
export const wallNow = now;

/** Resolves with the first line of `type` (already seen or to come) matching `where`, within `ms`. */
export function nextLine<T extends FaultLine['type']>(
  worker: FaultWorker,
  type: T,
  ms: number,
  where: (line: Extract<FaultLine, { type: T }>) => boolean = () => true,
): Promise<Extract<FaultLine, { type: T }>> {
  const match = (l: FaultLine): l is Extract<FaultLine, { type: T }> =>
    l.type === type && where(l as Extract<FaultLine, { type: T }>);
  const seen = worker.lines.find(match);
  if (seen) return Promise.resolve(seen);
  const line = within(
    new Promise<Extract<FaultLine, { type: T }>>((resolve) =>
      worker.onLine((l) => {
        if (match(l)) resolve(l);
      }),
    ),
    ms,
    `worker ${worker.pid}: line "${type}"`,
  );
  line.catch(() => undefined);
  return line;
}

export interface Settled<T> {
  ok: boolean;
  value?: T;
  error?: unknown;
  /** performance.now() when the call was made. */
  startedAt: number;
  /** performance.now() when it settled. */
  at: number;
  /** ms from the call to its settling. */
  ms: number;
}

/** Settles a call, recording when (performance.now()) and after how long. */
export async function settle<T>(call: () => Promise<T>): Promise<Settled<T>> {
  const startedAt = performance.now();
  try {
    const value = await call();
    const at = performance.now();
    return { ok: true, value, startedAt, at, ms: at - startedAt };
  } catch (error) {
    const at = performance.now();
    return { ok: false, error, startedAt, at, ms: at - startedAt };
  }
}

/** 'acquired' or the error's name, for readable assertions. */
export function outcome(r: Settled<unknown>): string {
  if (r.ok) return 'acquired';
  const e = r.error as Error | undefined;
  return e?.name ?? typeof e;
}

/** 'acquired' or '<ErrorName>: <message>'. */
export function describeOutcome(r: Settled<unknown>): string {
  if (r.ok) return 'acquired';
  const e = r.error as Error | undefined;
  return `${e?.name ?? typeof e}: ${e?.message ?? String(e)}`;
}

export async function releaseIfHeld(r: Settled<unknown>): Promise<void> {
  const v = r.value as Partial<LockHandle> | undefined;
  if (r.ok && v && typeof v.release === 'function') await v.release();
}

/** Resolves when `signal` aborts (at once if it has), with performance.now(); bounded by `ms`. */
export function abortedWithin(signal: AbortSignal, ms: number): Promise<number | undefined> {
  if (signal.aborted) return Promise.resolve(performance.now());
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve(performance.now());
      },
      { once: true },
    );
  });
}

/** Freezes a server (SIGSTOP) for `ms`, running `during` meanwhile; always resumes it. */
export async function frozen<T>(
  server: RedisServerHandle,
  ms: number,
  during: () => Promise<T>,
): Promise<T> {
  const until = performance.now() + ms;
  server.kill('SIGSTOP');
  try {
    const result = await during();
    const left = until - performance.now();
    if (left > 0) await new Promise((r) => setTimeout(r, left));
    return result;
  } finally {
    server.kill('SIGCONT');
  }
}

/** Polls `check` every `everyMs` until it returns true; false after `ms`. */
export async function eventually(
  check: () => Promise<boolean> | boolean,
  ms: number,
  everyMs = 50,
): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (performance.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** True when every fence is a safe integer larger than the one before. */
export const strictlyIncreasing = (fences: readonly number[]): boolean =>
  fences.every((f, i) => Number.isSafeInteger(f) && (i === 0 || f > fences[i - 1]));

/** The first place `fences` does not increase, with its neighbours, for assertion messages. */
export function backwardsStep(fences: readonly number[]): string {
  const i = fences.findIndex((f, j) => j > 0 && !(f > fences[j - 1]));
  if (i < 0) return 'increasing';
  return `#${i} of ${fences.length}: ...${fences.slice(Math.max(0, i - 2), i + 2).join(', ')}...`;
}

/**
 * A `hold` line of a load worker, `by` its pid and, when its lease ended while the section ran,
 * why (an overlap after an `expired` lease is a holder stalled past its lease, not a second
 * holder within a valid one): the shape `findOverlaps` takes.
 */
export type LoadHold = Extract<FaultLine, { type: 'hold' }> & { by: string };

/**
 * Waits (bounded by `ms`) for every load worker to exit: their exit results, the `error` lines
 * and the `hold` lines of them all.
 */
export async function loadResults(workers: FaultWorker[], ms: number) {
  const results = await within(Promise.all(workers.map((w) => w.exited)), ms, 'the load workers');
  const lines = results.flatMap((r) => r.lines);
  const errors = lines.filter(
    (l): l is Extract<FaultLine, { type: 'error' }> => l.type === 'error',
  );
  const holds: LoadHold[] = lines
    .filter((l): l is Extract<FaultLine, { type: 'hold' }> => l.type === 'hold')
    .map((h) => ({ ...h, by: h.lost ? `${h.pid} (lease ${h.lost})` : String(h.pid) }));
  return { results, errors, holds };
}
