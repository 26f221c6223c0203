import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * redis-server processes for `npm run demo` and `npm run bench`: on 127.0.0.1 only, nothing kept
 * on disk, stopped by the PID we spawned. (The test suites have their own harness in
 * test/support.)
 */

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 3_000;
const ATTEMPTS = 5;

/** Every server started here and not stopped yet, for `killAllStartedSync`. */
const started = new Set<ChildProcess>();

/**
 * Last resort on exit (including a crash): SIGKILL every server this process started, by PID.
 * Synchronous, so it works in an 'exit' handler.
 */
export function killAllStartedSync(): void {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  started.clear();
}

export interface RedisProcess {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** SIGTERM, SIGKILL after 3 s; resolves once it has exited. */
  stop(): Promise<void>;
}

function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/usr/local/bin'];
  for (const dir of dirs.filter(Boolean)) {
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/**
 * The redis-server binary. Missing and root (a fresh container): installs the Debian package
 * with apt-get. Missing otherwise: throws a sentence saying how to get one.
 */
export function ensureRedisServer(log: (line: string) => void): string {
  const found = findBinary('redis-server');
  if (found) return found;
  if (process.getuid?.() === 0 && findBinary('apt-get')) {
    log('redis-server is not installed; installing it with apt-get (root, one time)...');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    for (const args of [['update'], ['install', '-y', 'redis-server']]) {
      spawnSync('apt-get', args, { env, stdio: ['ignore', 2, 2] });
    }
    const installed = findBinary('redis-server');
    if (installed) return installed;
  }
  throw new Error(
    'redis-server is not installed: install it (`sudo apt-get install -y redis-server`, ' +
      '`brew install redis`) or pass --redis-url redis://127.0.0.1:6379 to use a running one.',
  );
}

/** A free loopback port (another process may still take it first; start() then retries). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once `url` answers PING with PONG; rejects after `timeoutMs`. */
export async function ping(url: string, timeoutMs = 2_000): Promise<void> {
  const { hostname, port } = new URL(url);
  const reply = await new Promise<string>((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) || 6379 });
    let data = '';
    socket.setTimeout(timeoutMs, () =>
      socket.destroy(new Error(`no answer within ${timeoutMs} ms`)),
    );
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString();
      if (data.includes('\r\n')) {
        socket.destroy();
        resolve(data.trim());
      }
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('connection closed without an answer')));
  });
  if (reply !== '+PONG' && !reply.startsWith('-NOAUTH')) {
    throw new Error(`${url} answered ${JSON.stringify(reply)} to PING`);
  }
}

/**
 * Starts one redis-server on a free loopback port (or on `fixedPort`, e.g. to restart one that
 * was stopped) and resolves once it answers PING. `extraArgs` are appended to the command line
 * (e.g. `--dir` for a replica).
 */
export async function startRedis(
  binary: string,
  extraArgs: string[] = [],
  fixedPort?: number,
): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = fixedPort ?? (await freePort());
    const child = spawn(
      binary,
      [
        '--port',
        String(port),
        '--bind',
        HOST,
        '--save',
        '',
        '--appendonly',
        'no',
        '--daemonize',
        'no',
        '--loglevel',
        'warning',
        ...extraArgs,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    started.add(child);
    child.once('exit', () => started.delete(child));
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const url = `redis://${HOST}:${port}`;
    try {
      await waitForPong(child, url);
    } catch (err) {
      await terminate(child, exited);
      if (attempt < ATTEMPTS && !fixedPort && /Address already in use/i.test(output)) continue;
      throw new Error(`${(err as Error).message}\n${output}`);
    }
    let stopping: Promise<void> | undefined;
    return {
      url,
      port,
      pid: child.pid!,
      stop: () => (stopping ??= terminate(child, exited)),
    };
  }
}

/** Starts `count` servers (a Redlock quorum when > 1); on failure stops those already up. */
export async function startRedisServers(binary: string, count: number): Promise<RedisProcess[]> {
  const results = await Promise.allSettled(Array.from({ length: count }, () => startRedis(binary)));
  const up = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(up.map((r) => r.stop()));
    throw failed.reason;
  }
  return up;
}

async function waitForPong(child: ChildProcess, url: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server for ${url} exited before answering PING.`);
    }
    try {
      return await ping(url, 500);
    } catch {
      if (Date.now() > deadline) {
        throw new Error(
          `redis-server for ${url} did not answer PING within ${READY_TIMEOUT_MS} ms.`,
        );
      }
      await sleep(25);
    }
  }
}

async function terminate(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const escalate = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await exited;
  clearTimeout(escalate);
}
