import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Runs instances of the sample app (`dist-apps/sample/main.js`) as separate OS processes on
 * loopback ports, all sharing one SQLite file and one Redis, as a flash sale runs behind a load
 * balancer. Used by `npm run demo` and by the multi-process e2e tests.
 */

const READY = /listening on (http:\/\/127\.0\.0\.1:(\d+))/;
const OUTPUT_LIMIT = 64 * 1024;
const STOP_GRACE_MS = 10_000;

export interface SampleClusterOptions {
  /** How many processes. */
  readonly instances: number;
  /** One URL, or several for a Redlock quorum. */
  readonly redisUrls: readonly string[];
  /** The SQLite file they share (created if missing). */
  readonly dbPath: string;
  /** Simulated database round trip between a read and its write, ms. @default 5 */
  readonly latencyMs?: number;
  /** Schedule of the tick job. @default 'off' */
  readonly cron?: string;
  /** The lock wait (module waitTimeout), ms. @default 10_000 */
  readonly lockWaitMs?: number;
  /** The lease of every lock (module ttl), ms. @default 30_000 */
  readonly lockTtlMs?: number;
  /** Where the purchase path reports to the chaos demo (`SAMPLE_CHAOS_URL`). @default none */
  readonly chaosUrl?: string;
  /** Nest log levels. @default 'warn,error' */
  readonly logLevels?: string;
  /** Instance names are `<prefix>-1`, `<prefix>-2`... @default 'app' */
  readonly namePrefix?: string;
  /** When set, each instance's output is also written to `<logDir>/<name>.log`. */
  readonly logDir?: string;
  /** @default 30_000 */
  readonly readyTimeoutMs?: number;
  /** More environment for every instance (`SAMPLE_LOCK_POSTGRES_URL`...). */
  readonly env?: Readonly<Record<string, string>>;
}

export interface SampleInstance {
  readonly name: string;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** The last 64 KB of its stdout and stderr. */
  output(): string;
  /** SIGTERM (a clean Nest shutdown), SIGKILL after 10 s; resolves once it has exited. */
  stop(): Promise<void>;
}

export interface SampleCluster {
  readonly instances: readonly SampleInstance[];
  readonly urls: readonly string[];
  /** Stops every instance, in parallel. */
  stop(): Promise<void>;
}

/** The repository root: the nearest directory up from here whose package.json is nest-locked. */
export function repoRoot(from = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
        name?: string;
      };
      if (pkg.name === 'nest-locked') return dir;
    } catch {
      // No package.json here.
    }
    if (path.dirname(dir) === dir) throw new Error(`No nest-locked package.json above ${from}.`);
  }
}

/** The compiled sample, or an error saying how to build it. */
export function sampleMain(): string {
  const main = path.join(repoRoot(), 'dist-apps', 'sample', 'main.js');
  if (!fs.existsSync(main) || !fs.existsSync(path.join(repoRoot(), 'dist', 'index.js'))) {
    throw new Error(`${main} is missing: run \`npm run build && npm run build:apps\` first.`);
  }
  return main;
}

// Children still running, killed if this process exits without stopping them (a crash, a
// failed test file): a sample instance must never outlive its launcher.
const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const c of live) if (c.pid !== undefined) c.kill('SIGKILL');
    });
  }
}

/** Starts every instance in parallel and resolves once all of them listen. */
export async function startSampleCluster(options: SampleClusterOptions): Promise<SampleCluster> {
  const main = sampleMain();
  fs.mkdirSync(path.dirname(options.dbPath), { recursive: true });
  if (options.logDir) fs.mkdirSync(options.logDir, { recursive: true });
  const prefix = options.namePrefix ?? 'app';
  const results = await Promise.allSettled(
    Array.from({ length: options.instances }, (_, i) =>
      startSampleInstance(`${prefix}-${i + 1}`, options, main),
    ),
  );
  const instances = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(instances.map((i) => i.stop()));
    throw failed.reason;
  }
  return {
    instances,
    urls: instances.map((i) => i.url),
    stop: async () => {
      await Promise.all(instances.map((i) => i.stop()));
    },
  };
}

/**
 * Starts one instance named `name` (e.g. a replacement for one that was killed) and resolves
 * once it listens. It is not part of any cluster's `stop()`: stop it yourself.
 */
export async function startSampleInstance(
  name: string,
  options: SampleClusterOptions,
  main = sampleMain(),
): Promise<SampleInstance> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: '0',
    REDIS_URL: options.redisUrls.join(','),
    SAMPLE_INSTANCE: name,
    SAMPLE_DB_PATH: options.dbPath,
    SAMPLE_DB_LATENCY_MS: String(options.latencyMs ?? 5),
    SAMPLE_CRON: options.cron ?? 'off',
    SAMPLE_LOCK_WAIT_MS: String(options.lockWaitMs ?? 10_000),
    SAMPLE_LOCK_TTL_MS: String(options.lockTtlMs ?? 30_000),
    SAMPLE_CHAOS_URL: options.chaosUrl ?? '',
    SAMPLE_LOG: options.logLevels ?? 'warn,error',
    NO_COLOR: '1',
    ...options.env,
  };
  const child = spawn(process.execPath, [main], {
    cwd: repoRoot(),
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) {
    throw new Error(`Could not start ${name}: ${process.execPath} ${main} did not spawn.`);
  }
  track(child);
  const pid = child.pid;
  const log = options.logDir
    ? fs.createWriteStream(path.join(options.logDir, `${name}.log`))
    : undefined;
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => log?.end());

  const ready = new Promise<string>((resolve, reject) => {
    const collect = (chunk: Buffer) => {
      log?.write(chunk);
      output = (output + chunk.toString()).slice(-OUTPUT_LIMIT);
      const match = READY.exec(output);
      if (match) resolve(match[1]);
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    child.once('exit', (code, signal) =>
      reject(
        new Error(
          `${name} (pid ${pid}) exited (${signal ?? `code ${code}`}) before listening. ` +
            `Its output:\n${output}`,
        ),
      ),
    );
  });
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const escalate = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        await exited;
        clearTimeout(escalate);
      }
    })();
    return stopping;
  };

  const timeoutMs = options.readyTimeoutMs ?? 30_000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new Error(`${name} (pid ${pid}) did not listen within ${timeoutMs} ms:\n${output}`)),
      timeoutMs,
    );
  });
  let url: string;
  try {
    url = await Promise.race([ready, timeout]);
  } catch (err) {
    await stop();
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return {
    name,
    url,
    port: Number(new URL(url).port),
    pid,
    output: () => output,
    stop,
  };
}
