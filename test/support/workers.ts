import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { WorkerConfig, WorkerLine } from '../fixtures/lock-worker';

/**
 * Runs `test/fixtures/<name>.ts` as separate OS processes (the compiled `dist-apps/` copy, so a
 * worker starts in plain Node without ts-jest), collects their JSON lines, and makes sure none
 * outlives the test (`killWorkers` in `afterAll`).
 */

const ROOT = path.resolve(__dirname, '../..');
const live = new Set<ChildProcessWithoutNullStreams>();

/** The shape every fixture's JSON lines share. */
export interface AnyLine {
  type: string;
}

export interface WorkerResult<L extends AnyLine = WorkerLine> {
  /** Every JSON line the worker printed, in order. */
  lines: L[];
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Non-JSON output (logs, stack traces), for assertion messages. */
  other: string;
}

export interface Worker<L extends AnyLine = WorkerLine> {
  readonly pid: number;
  /** Resolves when the worker printed `ready`; rejects if it exited before. */
  readonly ready: Promise<void>;
  /** Resolves with everything it printed once it exited (never rejects). */
  readonly exited: Promise<WorkerResult<L>>;
  /** The lines seen so far. */
  readonly lines: L[];
  /** Subscribes to each line as it arrives. */
  onLine(listener: (line: L) => void): void;
  /** Writes one line to the worker's stdin (`go` is sent by `go()`). */
  send(line: string): void;
  /** Starts the scenario. */
  go(): void;
  kill(): void;
}

function fixturePath(name: string): string {
  const file = path.join(ROOT, 'dist-apps', 'test', 'fixtures', `${name}.js`);
  if (!fs.existsSync(file)) {
    throw new Error(
      `${file} is missing: run "npm run pretest" (scripts/build-for-tests.js) first.`,
    );
  }
  return file;
}

/**
 * Spawns `dist-apps/test/fixtures/<fixture>.js` with `config` as JSON. Other fixtures than
 * lock-worker name their config and line types:
 * `spawnWorker<FaultWorkerConfig, FaultLine>(config, 'fault-worker')`.
 */
export function spawnWorker<C extends object = WorkerConfig, L extends AnyLine = WorkerLine>(
  config: C,
  fixture = 'lock-worker',
): Worker<L> {
  const child = spawn(process.execPath, [fixturePath(fixture), JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_ENV: 'test' },
  });
  live.add(child);
  const lines: L[] = [];
  const listeners: ((line: L) => void)[] = [];
  let other = '';
  let buffer = '';
  let markReady: () => void = () => undefined;
  let failReady: (e: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  // Avoid an unhandled rejection when nobody awaits `ready` after a crash.
  ready.catch(() => undefined);

  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    buffer += chunk;
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const text = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      let line: L | undefined;
      if (text.startsWith('{"type":')) {
        try {
          line = JSON.parse(text) as L;
        } catch {
          line = undefined;
        }
      }
      if (!line) {
        other += `${text}\n`;
        continue;
      }
      lines.push(line);
      if (line.type === 'ready') markReady();
      for (const l of listeners) l(line);
    }
  });
  // A worker killed while a line to it is in flight: EPIPE on its stdin is not our failure.
  child.stdin.on('error', () => undefined);
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (other += chunk));

  const exited = new Promise<WorkerResult<L>>((resolve) => {
    child.on('close', (code, signal) => {
      live.delete(child);
      failReady(
        new Error(`worker ${child.pid} exited (${code ?? signal}) before ready:\n${other}`),
      );
      resolve({ lines, code, signal, other });
    });
  });

  return {
    pid: child.pid ?? -1,
    ready,
    exited,
    lines,
    onLine: (listener) => listeners.push(listener),
    go: () => {
      child.stdin.write('go\n');
    },
    send: (line) => {
      if (child.exitCode === null && child.signalCode === null) child.stdin.write(`${line}\n`);
    },
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/**
 * Spawns one worker per config, starts them together once all are ready, and waits for all to
 * exit. Throws (after killing the rest) if one does not come up.
 */
export async function runWorkers(configs: WorkerConfig[]): Promise<WorkerResult[]> {
  const workers = configs.map((c) => spawnWorker(c));
  try {
    await Promise.all(workers.map((w) => w.ready));
  } catch (err) {
    workers.forEach((w) => w.kill());
    await Promise.all(workers.map((w) => w.exited));
    throw err;
  }
  workers.forEach((w) => w.go());
  return Promise.all(workers.map((w) => w.exited));
}

/** Kills every worker still running (for `afterAll`) and waits until they are gone. */
export async function killWorkers(): Promise<void> {
  const children = [...live];
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('close', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

/** The lines of one type, typed. */
export function linesOf<T extends WorkerLine['type']>(
  results: readonly WorkerResult[] | WorkerResult,
  type: T,
): Extract<WorkerLine, { type: T }>[] {
  const all = Array.isArray(results) ? results : [results as WorkerResult];
  return all
    .flatMap((r) => r.lines)
    .filter((l): l is Extract<WorkerLine, { type: T }> => {
      return l.type === type;
    });
}

/** A readable summary of a worker's failure, for assertion messages. */
export function describeResult(r: WorkerResult): string {
  const errors = r.lines.filter((l) => l.type === 'error');
  return `exit ${r.code ?? r.signal}; errors: ${JSON.stringify(errors.slice(0, 3))}; output: ${r.other.slice(0, 2000)}`;
}
