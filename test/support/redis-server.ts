import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
// Imported from node:timers, not used as globals: a suite that turns on jest's fake timers must
// still be able to start and stop servers.
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { findBinary, installWithApt } from './server-binary';
import {
  followServer,
  removeServerDir,
  SERVER_DIR_PREFIX,
  SERVER_OUTPUT_LIMIT,
} from './pid-registry';

/**
 * Real redis-server processes for the integration and e2e suites. Every server listens on
 * 127.0.0.1 only, runs in the foreground (we need its PID) and keeps nothing on disk.
 */

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 3_000;
const CLUSTER_CREATE_TIMEOUT_MS = 30_000;
const CLUSTER_READY_TIMEOUT_MS = 20_000;
/** Attempts at a fresh port when another process takes ours between picking and binding. */
const SPAWN_ATTEMPTS = 5;
/** Redis listens for cluster bus traffic on port + 10000, so a cluster port must stay below. */
const MAX_CLUSTER_PORT = 65_535 - 10_000;
const CLUSTER_ARGS = [
  '--cluster-enabled',
  'yes',
  '--cluster-config-file',
  'nodes.conf',
  '--cluster-node-timeout',
  '2000',
];
/**
 * For servers with replicas: the first sync of a replica starts at once (Redis waits 5 s by
 * default for more replicas to share a diskless transfer).
 */
export const REPLICATION_ARGS = ['--repl-diskless-sync-delay', '0'];
const NOT_INSTALLED =
  'redis-server is not installed; install it with `sudo apt-get install -y redis-server` ' +
  '(Debian/Ubuntu) or point REDIS_URL at a running server.';

export interface RedisServerHandle {
  port: number;
  /** `'::1'` only for an external server whose REDIS_URL names that host. */
  host: '127.0.0.1' | '::1';
  /** `redis://127.0.0.1:<port>`, or REDIS_URL itself for an external server. */
  url: string;
  /** PID of the running redis-server; `undefined` while it is down or when it is external. */
  pid: number | undefined;
  /** SIGTERM, then SIGKILL after ~3 s; resolves once the process is gone. Idempotent. */
  stop(): Promise<void>;
  /** Sends `signal` (default SIGKILL) to the server and returns at once, like a crash. */
  kill(signal?: NodeJS.Signals): void;
  /**
   * Starts the server again on the same port, stopping it first if it is still up. Data is not
   * kept. A cluster node keeps its identity and slots (nodes.conf) across kill() + restart(), and
   * restart() resolves once it serves them again; after stop() it comes back as a lone node.
   */
  restart(): Promise<void>;
  /** True for the server named by REDIS_URL, which the harness neither started nor may stop. */
  readonly external: boolean;
}

export interface StartRedisServerOptions {
  /** Fixed port; by default a free loopback port is picked. */
  port?: number;
  /** Extra redis-server arguments, e.g. `['--maxmemory', '10mb']`; they win over the defaults. */
  args?: string[];
  /** Start with cluster mode on (`nodes.conf` in the server's own directory). */
  cluster?: boolean;
  /**
   * Run as a Sentinel (`redis-server sentinel.conf --sentinel`): these lines (`sentinel monitor
   * ...`) are written to `sentinel.conf` in the server's own directory at every start (Sentinel
   * rewrites that file as it learns, and a restart starts from these lines again).
   */
  sentinel?: readonly string[];
}

export interface StartRedisClusterOptions {
  /** Replicas per master (`redis-cli --cluster create --cluster-replicas`); default 0. */
  replicasPerMaster?: number;
  /**
   * `cluster-node-timeout` in ms (default 2000): how long a node may not answer before it is
   * failed over; a failover of a killed master takes about twice this.
   */
  nodeTimeoutMs?: number;
}

export interface RedisClusterHandle {
  /** Every node, masters and replicas (which is which changes with failovers). */
  nodes: RedisServerHandle[];
  /** What ioredis `new Cluster(startupNodes)` takes. */
  startupNodes: { host: string; port: number }[];
  stop(): Promise<void>;
}

/** Thrown when redis-server exits before it answers PING. */
class RedisStartError extends Error {
  constructor(
    message: string,
    readonly portInUse: boolean,
  ) {
    super(message);
    this.name = 'RedisStartError';
  }
}

let redisServerLookup: string | Error | undefined;

/**
 * Path of the redis-server binary. When it is missing and we are root (a fresh CI container),
 * installs the Debian package first. The answer is cached for the process.
 *
 * @example
 * const bin = ensureRedisServerBinary(); // '/usr/bin/redis-server'
 */
export function ensureRedisServerBinary(): string {
  redisServerLookup ??= lookUpRedisServer();
  if (redisServerLookup instanceof Error) throw redisServerLookup;
  return redisServerLookup;
}

function lookUpRedisServer(): string | Error {
  const found = findBinary('redis-server');
  if (found) return found;
  if (process.getuid?.() !== 0) return new Error(NOT_INSTALLED);
  const status = installWithApt('redis-server');
  return (
    findBinary('redis-server') ??
    new Error(
      `redis-server is not installed and \`apt-get install -y redis-server\` ended with ${status}; ` +
        'see its output above, or point REDIS_URL at a running server.',
    )
  );
}

/** redis-cli comes in the same Debian package (via redis-tools) as redis-server. */
function ensureRedisCliBinary(): string {
  const found = findBinary('redis-cli');
  if (found) return found;
  ensureRedisServerBinary();
  const installed = findBinary('redis-cli');
  if (installed) return installed;
  throw new Error(
    'redis-cli is not installed; install it with `sudo apt-get install -y redis-server` ' +
      '(it ships in redis-tools, a dependency of that package).',
  );
}

/**
 * Starts one redis-server on 127.0.0.1 and resolves once it answers PING.
 *
 * @example
 * const server = await startRedisServer();
 * const redis = new Redis(server.url);
 * // ...
 * redis.disconnect();
 * await server.stop();
 */
export async function startRedisServer(
  options: StartRedisServerOptions = {},
): Promise<RedisServerHandle> {
  const binary = ensureRedisServerBinary();
  const cluster = options.cluster === true;
  const extraArgs = [...(cluster ? CLUSTER_ARGS : []), ...(options.args ?? [])];
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await pickFreePort(cluster));
    const server = new SpawnedRedisServer(binary, port, extraArgs, options.sentinel);
    try {
      await server.launch();
      return server;
    } catch (error) {
      await server.stop();
      const retry =
        options.port === undefined &&
        error instanceof RedisStartError &&
        error.portInUse &&
        attempt < SPAWN_ATTEMPTS;
      if (!retry) throw error;
    }
  }
}

/**
 * Starts `count` servers in parallel; if one fails, stops the others and rethrows.
 *
 * @example
 * const servers = await startRedisServers(5); // a Redlock quorum
 */
export async function startRedisServers(
  count: number,
  options: Omit<StartRedisServerOptions, 'port'> = {},
): Promise<RedisServerHandle[]> {
  const results = await Promise.allSettled(
    Array.from({ length: count }, () => startRedisServer(options)),
  );
  const started = results.flatMap((result) =>
    result.status === 'fulfilled' ? [result.value] : [],
  );
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) {
    await stopAll(started);
    throw failed.reason;
  }
  return started;
}

/**
 * Stops every handle in parallel; `undefined` entries (a `beforeAll` that failed half-way) are
 * skipped.
 */
export async function stopAll(handles: Iterable<RedisServerHandle | undefined>): Promise<void> {
  await Promise.all([...handles].map((handle) => handle?.stop()));
}

/**
 * The server for a single-node suite: the one REDIS_URL names (loopback only), else a fresh
 * redis-server. `stop()` on an external server does nothing.
 *
 * @example
 * let redis: RedisServerHandle;
 * beforeAll(async () => (redis = await useRedis()));
 * afterAll(() => redis.stop());
 */
export async function useRedis(): Promise<RedisServerHandle> {
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl) return startRedisServer();
  const handle = externalHandle(redisUrl);
  try {
    const reply = await sendCommand(handle.host, handle.port, ['PING'], 2_000);
    if (reply !== 'PONG') throw new Error(`it answered ${JSON.stringify(reply)} to PING`);
  } catch (error) {
    // A server that wants a password is there all the same; the URL carries the password.
    if (!(error instanceof Error && error.message.startsWith('NOAUTH'))) {
      throw new Error(
        `REDIS_URL=${redact(redisUrl)} is not usable (${(error as Error).message}); ` +
          'start that server or unset REDIS_URL to let the tests start their own redis-server.',
      );
    }
  }
  return handle;
}

/**
 * Starts `masters` cluster-enabled servers (and `replicasPerMaster` replicas of each), joins them
 * with `redis-cli --cluster create` and resolves once every node reports `cluster_state:ok`.
 *
 * @example
 * const cluster = await startRedisCluster();
 * const client = new Cluster(cluster.startupNodes);
 * // ...
 * client.disconnect();
 * await cluster.stop();
 *
 * // 3 masters with a replica each, failing over ~2 s after a master is killed:
 * const ha = await startRedisCluster(3, { replicasPerMaster: 1, nodeTimeoutMs: 1_000 });
 */
export async function startRedisCluster(
  masters = 3,
  options: StartRedisClusterOptions = {},
): Promise<RedisClusterHandle> {
  if (!Number.isInteger(masters) || masters < 3) {
    throw new Error(`A Redis cluster needs at least 3 masters; startRedisCluster got ${masters}.`);
  }
  const replicas = options.replicasPerMaster ?? 0;
  if (!Number.isInteger(replicas) || replicas < 0) {
    throw new Error(
      `replicasPerMaster must be an integer >= 0; startRedisCluster got ${replicas}.`,
    );
  }
  const args = [
    // A replica's first sync starts at once, not after the default 5 s wait for more replicas.
    ...REPLICATION_ARGS,
    ...(options.nodeTimeoutMs === undefined
      ? []
      : ['--cluster-node-timeout', String(options.nodeTimeoutMs)]),
  ];
  const cli = ensureRedisCliBinary();
  const nodes = await startRedisServers(masters * (1 + replicas), { cluster: true, args });
  try {
    await createCluster(cli, nodes, replicas);
    await waitForClusterOk(nodes);
    // A replica that never finished its first sync cannot be promoted: wait for all of them.
    if (replicas > 0) await waitForReplicasOnline(nodes, masters * replicas);
    for (const node of nodes) (node as SpawnedRedisServer).clusterMember = true;
  } catch (error) {
    await stopAll(nodes);
    throw error;
  }
  return {
    nodes,
    startupNodes: nodes.map(({ host, port }) => ({ host, port })),
    stop: () => stopAll(nodes),
  };
}

class SpawnedRedisServer implements RedisServerHandle {
  readonly host = HOST;
  readonly url: string;
  readonly external = false;
  /**
   * Set once the node has joined a cluster: restart() then also waits until the node serves
   * its slots again (it reports cluster_state:fail for ~2 s after it comes back).
   */
  clusterMember = false;
  private readonly args: readonly string[];
  private readonly dir: string;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private stopping: Promise<void> | undefined;
  private output = '';

  constructor(
    private readonly binary: string,
    readonly port: number,
    extraArgs: readonly string[],
    private readonly sentinelLines?: readonly string[],
  ) {
    this.url = `redis://${HOST}:${port}`;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), SERVER_DIR_PREFIX));
    // A Sentinel takes its config file first (it must be writable: Sentinel saves its state).
    const sentinel = sentinelLines ? [this.sentinelConf, '--sentinel'] : [];
    // --save "" and --appendonly no: nothing on disk, so a restart starts empty.
    this.args = [
      ...sentinel,
      '--port',
      String(port),
      '--bind',
      HOST,
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'no',
      '--dir',
      this.dir,
      '--loglevel',
      'warning',
      ...extraArgs,
    ];
  }

  get pid(): number | undefined {
    return this.isRunning() ? this.child?.pid : undefined;
  }

  private get sentinelConf(): string {
    return path.join(this.dir, 'sentinel.conf');
  }

  /** Spawns redis-server (never daemonized) and waits until it answers PING. */
  async launch(): Promise<void> {
    this.stopping = undefined;
    this.output = '';
    // stop() removes the directory; a later restart() gets a fresh, empty one.
    fs.mkdirSync(this.dir, { recursive: true });
    if (this.sentinelLines)
      fs.writeFileSync(this.sentinelConf, `${this.sentinelLines.join('\n')}\n`);
    const child = spawn(this.binary, this.args, {
      cwd: this.dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    if (child.pid === undefined) {
      const [error] = (await once(child, 'error')) as [Error];
      throw new Error(`Could not start ${this.binary}: ${error.message}`);
    }
    const pid = child.pid;
    this.exited = followServer(
      child as typeof child & { pid: number },
      { port: this.port, dir: this.dir },
      (text) => (this.output = (this.output + text).slice(-SERVER_OUTPUT_LIMIT)),
    );
    await this.waitUntilReady(child, pid);
  }

  stop(): Promise<void> {
    this.stopping ??= this.terminate().finally(() => {
      removeServerDir(this.dir);
      // Its nodes.conf is gone: after a restart it is a lone, empty node.
      this.clusterMember = false;
    });
    return this.stopping;
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.isRunning()) this.child?.kill(signal);
  }

  async restart(): Promise<void> {
    // Not stop(): the directory stays, so a cluster node comes back with its nodes.conf.
    await this.terminate();
    for (let attempt = 1; ; attempt++) {
      try {
        await this.launch();
        if (this.clusterMember) await waitForClusterOk([this]);
        return;
      } catch (error) {
        await this.terminate();
        // The port is ours to keep, so wait for whoever took it rather than pick another.
        if (!(error instanceof RedisStartError && error.portInUse) || attempt >= SPAWN_ATTEMPTS) {
          throw error;
        }
        await sleep(200 * attempt);
      }
    }
  }

  private isRunning(): boolean {
    const child = this.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  private async terminate(): Promise<void> {
    const child = this.child;
    if (child && this.isRunning()) {
      child.kill('SIGTERM');
      // A server frozen with kill('SIGSTOP') handles SIGTERM only once it runs again.
      child.kill('SIGCONT');
      const escalate = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      try {
        await this.exited;
      } finally {
        clearTimeout(escalate);
      }
    }
    await this.exited;
  }

  private async waitUntilReady(child: ChildProcess, pid: number): Promise<void> {
    let timedOut = false;
    const timer = setTimeout(() => (timedOut = true), READY_TIMEOUT_MS);
    try {
      for (;;) {
        if (child.exitCode !== null || child.signalCode !== null) {
          const how = child.signalCode ?? `code ${child.exitCode}`;
          throw new RedisStartError(
            `redis-server on ${HOST}:${this.port} exited (${how}) before answering PING. ` +
              `Its output:\n${this.output}`,
            /Address already in use/i.test(this.output),
          );
        }
        if (await this.answersAsItself(pid)) return;
        if (timedOut) {
          throw new Error(
            `redis-server on ${HOST}:${this.port} did not answer PING within ` +
              `${READY_TIMEOUT_MS / 1000} s. Its output:\n${this.output}`,
          );
        }
        await sleep(25);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * PONG alone is not enough: if another server took the port first, it answers while ours is
   * about to exit with EADDRINUSE.
   */
  private async answersAsItself(pid: number): Promise<boolean> {
    try {
      if ((await sendCommand(HOST, this.port, ['PING'], 500)) !== 'PONG') return false;
      const info = await sendCommand(HOST, this.port, ['INFO', 'server'], 500);
      return info.includes(`process_id:${pid}\r\n`);
    } catch {
      // Not listening yet, or still loading.
      return false;
    }
  }
}

function externalHandle(redisUrl: string): RedisServerHandle {
  let parsed: URL;
  try {
    parsed = new URL(redisUrl);
  } catch {
    throw new Error(`REDIS_URL=${redisUrl} is not a URL; expected redis://127.0.0.1:<port>.`);
  }
  if (parsed.protocol !== 'redis:') {
    throw new Error(
      `REDIS_URL=${redact(redisUrl)} must use redis://; expected redis://127.0.0.1:<port>.`,
    );
  }
  // Tests may only ever talk to this machine.
  const hostname = parsed.hostname.toLowerCase();
  let host: '127.0.0.1' | '::1';
  if (hostname === '127.0.0.1' || hostname === 'localhost') host = '127.0.0.1';
  else if (hostname === '[::1]') host = '::1';
  else {
    throw new Error(
      `REDIS_URL=${redact(redisUrl)} points at ${parsed.hostname}, but tests may only use a loopback ` +
        'server (127.0.0.1, localhost or ::1).',
    );
  }
  // "localhost" may resolve to ::1 first while redis-server listens on 127.0.0.1 only.
  if (hostname === 'localhost') parsed.hostname = HOST;
  const port = parsed.port === '' ? 6379 : Number(parsed.port);
  const unavailable = (method: string) =>
    new Error(
      `${method}() needs a redis-server started by the harness, but REDIS_URL=${redact(redisUrl)} ` +
        'is in use; unset REDIS_URL for this suite.',
    );
  return {
    port,
    host,
    url: parsed.toString(),
    pid: undefined,
    external: true,
    stop: async () => undefined,
    kill: () => {
      throw unavailable('kill');
    },
    restart: async () => {
      throw unavailable('restart');
    },
  };
}

function redact(redisUrl: string): string {
  try {
    const parsed = new URL(redisUrl);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return redisUrl;
  }
}

/**
 * A free loopback port from the kernel. Another process may take it before redis-server binds
 * it; startRedisServer then retries with a new one.
 */
async function pickFreePort(cluster: boolean): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await listenOnce(0);
    if (port === undefined) continue;
    if (!cluster) return port;
    if (port <= MAX_CLUSTER_PORT && (await listenOnce(port + 10_000)) !== undefined) return port;
  }
  throw new Error(`Found no free port on ${HOST} for redis-server.`);
}

/** A loopback port nothing listens on (for a client that must find no server there). */
export const closedPort = (): Promise<number> => pickFreePort(false);

/** `count` distinct free loopback ports (for a cluster's members: client and peer ports). */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await closedPort());
  return [...ports];
}

/** Listens on `port` (0: any) and closes again; resolves with the port, or undefined if taken. */
function listenOnce(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen({ host: HOST, port, exclusive: true }, () => {
      const { port: bound } = server.address() as net.AddressInfo;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * Sends one command on a fresh connection and resolves with the reply: simple strings,
 * integers and bulk strings as text, error replies as a rejection. Enough for PING, INFO and
 * CLUSTER INFO without an ioredis client that would reconnect in the background.
 *
 * @example
 * const info = await sendCommand('127.0.0.1', server.port, ['INFO', 'replication'], 1_000);
 */
export function sendCommand(
  host: string,
  port: number,
  args: readonly string[],
  timeoutMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0);
    let settled = false;
    const socket = net.connect({ host, port });
    const finish = (error: Error | undefined, reply = '') => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (error) reject(error);
      else resolve(reply);
    };
    socket.setTimeout(timeoutMs, () =>
      finish(new Error(`no reply from ${host}:${port} within ${timeoutMs} ms`)),
    );
    socket.on('error', (error) => finish(error));
    socket.on('close', () => finish(new Error(`${host}:${port} closed the connection`)));
    socket.on('connect', () => {
      const encoded = args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('');
      socket.write(`*${args.length}\r\n${encoded}`);
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const reply = parseReply(received);
      if (reply instanceof Error) finish(reply);
      else if (reply !== undefined) finish(undefined, reply);
    });
  });
}

/** undefined while the reply is incomplete. */
function parseReply(buffer: Buffer): string | Error | undefined {
  const lineEnd = buffer.indexOf('\r\n');
  if (lineEnd === -1) return undefined;
  const line = buffer.toString('utf8', 1, lineEnd);
  switch (String.fromCharCode(buffer[0])) {
    case '+':
    case ':':
      return line;
    case '-':
      return new Error(line);
    case '$': {
      const length = Number(line);
      if (length < 0) return '';
      const start = lineEnd + 2;
      if (buffer.length < start + length + 2) return undefined;
      return buffer.toString('utf8', start, start + length);
    }
    default:
      return new Error(`Unexpected reply from redis: ${JSON.stringify(buffer.toString())}`);
  }
}

async function createCluster(
  cli: string,
  nodes: readonly RedisServerHandle[],
  replicasPerMaster: number,
): Promise<void> {
  const args = [
    '--cluster',
    'create',
    ...nodes.map((node) => `${node.host}:${node.port}`),
    '--cluster-replicas',
    String(replicasPerMaster),
    '--cluster-yes',
  ];
  try {
    await promisify(execFile)(cli, args, { timeout: CLUSTER_CREATE_TIMEOUT_MS });
  } catch (error) {
    const {
      stdout = '',
      stderr = '',
      message,
    } = error as Error & {
      stdout?: string;
      stderr?: string;
    };
    throw new Error(`redis-cli ${args.join(' ')} failed: ${message}\n${stdout}${stderr}`);
  }
}

/** Resolves once the masters among `nodes` report `count` replicas online in all (within 20 s). */
async function waitForReplicasOnline(
  nodes: readonly RedisServerHandle[],
  count: number,
): Promise<void> {
  const deadline = performance.now() + CLUSTER_READY_TIMEOUT_MS;
  for (;;) {
    const infos = await Promise.all(
      nodes.map((node) =>
        sendCommand(node.host, node.port, ['INFO', 'replication'], 1_000).catch(() => ''),
      ),
    );
    const online = infos
      .map((info) => info.split('\n').filter((l) => /^slave\d+:.*state=online/.test(l)).length)
      .reduce((a, b) => a + b, 0);
    if (online >= count) return;
    if (performance.now() > deadline) {
      throw new Error(
        `The cluster's replicas did not all come online within ` +
          `${CLUSTER_READY_TIMEOUT_MS / 1000} s (${online} of ${count}).`,
      );
    }
    await sleep(100);
  }
}

/**
 * Resolves once every node given reports `cluster_state:ok` (within 20 s); pass only nodes that
 * are up. After a master was killed, the others report `ok` again once a replica took its slots.
 */
export async function waitForClusterOk(nodes: readonly RedisServerHandle[]): Promise<void> {
  let timedOut = false;
  const timer = setTimeout(() => (timedOut = true), CLUSTER_READY_TIMEOUT_MS);
  try {
    for (;;) {
      const states = await Promise.all(
        nodes.map((node) =>
          sendCommand(node.host, node.port, ['CLUSTER', 'INFO'], 1_000).then(
            (info) => /^cluster_state:(\w+)/m.exec(info)?.[1] ?? 'unknown',
            (error: Error) => error.message,
          ),
        ),
      );
      if (states.every((state) => state === 'ok')) return;
      if (timedOut) {
        const report = nodes.map((node, i) => `${node.port}: ${states[i]}`).join(', ');
        throw new Error(
          `The redis cluster did not reach cluster_state:ok within ` +
            `${CLUSTER_READY_TIMEOUT_MS / 1000} s (${report}).`,
        );
      }
      await sleep(100);
    }
  } finally {
    clearTimeout(timer);
  }
}
