import * as net from 'node:net';
// Imported from node:timers, not used as globals, like redis-server.ts.
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  REPLICATION_ARGS,
  type RedisServerHandle,
  sendCommand,
  startRedisServer,
  startRedisServers,
  stopAll,
} from './redis-server';

/**
 * A Sentinel setup on loopback for the fault suite: one primary, its replicas and a few
 * `redis-server sentinel.conf --sentinel` processes monitoring it, every one a harness server
 * (PID record, stopped by PID). Failovers are fast: a primary that does not answer for
 * `downAfterMs` is failed over by the sentinels (quorum 2).
 */

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 20_000;

export interface StartSentinelGroupOptions {
  /** Name of the monitored group (`name` in ioredis' Sentinel options). Default `mymaster`. */
  name?: string;
  /** Replicas of the primary. Default 2 (one left to acknowledge writes after a failover). */
  replicas?: number;
  /** Sentinel processes. Default 3, quorum 2. */
  sentinels?: number;
  /** `sentinel down-after-milliseconds`. Default 1000. */
  downAfterMs?: number;
  /** `sentinel failover-timeout`. Default 3000. */
  failoverTimeoutMs?: number;
  /** More `redis-server` arguments for the first primary only. */
  primaryArgs?: string[];
}

export interface SentinelGroupHandle {
  readonly name: string;
  /** The primary, then the replicas, as started (roles change with failovers). */
  readonly servers: RedisServerHandle[];
  readonly sentinels: RedisServerHandle[];
  /** A lock group entry: ioredis Sentinel options. */
  readonly entry: { sentinels: { host: string; port: number }[]; name: string };
  /** The server the sentinels name as primary now (asks each sentinel until one answers). */
  primary(): Promise<RedisServerHandle>;
  /**
   * Resolves with the new primary once a sentinel names a server other than `old` and that
   * server answers as a master; rejects after `timeoutMs`.
   */
  waitForFailover(old: RedisServerHandle, timeoutMs?: number): Promise<RedisServerHandle>;
  /** `SENTINEL FAILOVER` on the first sentinel: a failover now, with the primary alive. */
  forceFailover(): Promise<void>;
  /** Resolves once the primary reports `count` replicas online (within `timeoutMs`). */
  waitForReplicas(count: number, timeoutMs?: number): Promise<void>;
  /**
   * Resolves with the primary once the group is settled (within `timeoutMs`): every sentinel
   * names it, it is the only live master, and every other live server replicates it with its
   * link up. A failover leaves the group unsettled for a while (replicas reconfigured, an
   * aborted attempt's promoted replica turned back); start the next fault from a settled group.
   */
  waitForSteadyState(timeoutMs?: number): Promise<RedisServerHandle>;
  /** Stops every sentinel and server by PID. */
  stop(): Promise<void>;
}

/**
 * Starts a primary, `replicas` replicas and `sentinels` sentinels, and resolves once the primary
 * has its replicas online and every sentinel knows the replicas and the other sentinels (so a
 * failover can be voted at once).
 *
 * @example
 * const group = await startSentinelGroup();
 * RedlockModule.forRoot({ clients: [group.entry] });
 * group.servers[0].kill(); // SIGKILL the primary
 * const next = await group.waitForFailover(group.servers[0]);
 * await group.stop();
 */
export async function startSentinelGroup(
  options: StartSentinelGroupOptions = {},
): Promise<SentinelGroupHandle> {
  const name = options.name ?? 'mymaster';
  const replicaCount = options.replicas ?? 2;
  const sentinelCount = options.sentinels ?? 3;
  const quorum = Math.floor(sentinelCount / 2) + 1;
  const servers: RedisServerHandle[] = [];
  const sentinels: RedisServerHandle[] = [];
  try {
    // Every data server may become the primary: each starts replicas' syncs at once.
    const primary = await startRedisServer({
      args: [...REPLICATION_ARGS, ...(options.primaryArgs ?? [])],
    });
    servers.push(primary);
    servers.push(
      ...(await startRedisServers(replicaCount, {
        args: [...REPLICATION_ARGS, '--replicaof', HOST, String(primary.port)],
      })),
    );
    const lines = [
      `sentinel monitor ${name} ${HOST} ${primary.port} ${quorum}`,
      `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1_000}`,
      `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 3_000}`,
      `sentinel parallel-syncs ${name} ${Math.max(1, replicaCount)}`,
    ];
    sentinels.push(...(await startRedisServers(sentinelCount, { sentinel: lines })));
    const handle = sentinelGroupHandle(name, servers, sentinels);
    await handle.waitForReplicas(replicaCount, READY_TIMEOUT_MS);
    await untilTrue(
      async () => {
        const views = await Promise.all(
          sentinels.map((s) => sentinelView(s, name).catch(() => undefined)),
        );
        return views.every(
          (v) =>
            v !== undefined &&
            v.replicas >= replicaCount &&
            v.otherSentinels >= sentinelCount - 1 &&
            v.primaryPort === primary.port,
        );
      },
      READY_TIMEOUT_MS,
      `the ${sentinelCount} sentinels of "${name}" did not all see its ${replicaCount} replicas and each other`,
    );
    return handle;
  } catch (error) {
    await stopAll([...sentinels, ...servers]);
    throw error;
  }
}

function sentinelGroupHandle(
  name: string,
  servers: RedisServerHandle[],
  sentinels: RedisServerHandle[],
): SentinelGroupHandle {
  const byPort = (port: number): RedisServerHandle => {
    const found = servers.find((s) => s.port === port);
    if (!found)
      throw new Error(`the sentinels name ${HOST}:${port}, which this group did not start`);
    return found;
  };
  const primary = async (): Promise<RedisServerHandle> => {
    const errors: string[] = [];
    for (const s of sentinels) {
      try {
        return byPort((await sentinelView(s, name)).primaryPort);
      } catch (error) {
        errors.push(`${s.port}: ${(error as Error).message}`);
      }
    }
    throw new Error(`no sentinel named the primary of "${name}" (${errors.join('; ')})`);
  };
  return {
    name,
    servers,
    sentinels,
    entry: { sentinels: sentinels.map((s) => ({ host: HOST, port: s.port })), name },
    primary,
    async forceFailover() {
      await sendCommand(HOST, sentinels[0].port, ['SENTINEL', 'FAILOVER', name], 1_000);
    },
    async waitForFailover(old, timeoutMs = 15_000) {
      let next: RedisServerHandle | undefined;
      await untilTrue(
        async () => {
          const named = await primary().catch(() => undefined);
          if (!named || named === old) return false;
          const role = await sendCommand(HOST, named.port, ['INFO', 'replication'], 500).catch(
            () => '',
          );
          if (!/^role:master/m.test(role)) return false;
          next = named;
          return true;
        },
        timeoutMs,
        `the sentinels did not fail "${name}" over from ${HOST}:${old.port}`,
      );
      return next!;
    },
    async waitForReplicas(count, timeoutMs = READY_TIMEOUT_MS) {
      await untilTrue(
        async () => {
          const current = await primary().catch(() => servers[0]);
          const info = await sendCommand(HOST, current.port, ['INFO', 'replication'], 500).catch(
            () => '',
          );
          const online = info.split('\n').filter((l) => /^slave\d+:.*state=online/.test(l));
          return online.length >= count;
        },
        timeoutMs,
        `the primary of "${name}" did not report ${count} replica(s) online`,
      );
    },
    async waitForSteadyState(timeoutMs = READY_TIMEOUT_MS) {
      let settled: RedisServerHandle | undefined;
      await untilTrue(
        async () => {
          const named = await Promise.all(
            sentinels.map((s) =>
              sentinelView(s, name).then(
                (v) => v.primaryPort,
                () => -1,
              ),
            ),
          );
          if (named.some((port) => port !== named[0])) return false;
          const primaryPort = named[0];
          const live = servers.filter((s) => s.pid !== undefined);
          const roles = await Promise.all(
            live.map((s) =>
              sendCommand(HOST, s.port, ['INFO', 'replication'], 500).catch(() => ''),
            ),
          );
          const ok = live.every((s, i) =>
            s.port === primaryPort
              ? /^role:master/m.test(roles[i])
              : /^role:slave/m.test(roles[i]) &&
                new RegExp(`^master_port:${primaryPort}\\r?$`, 'm').test(roles[i]) &&
                /^master_link_status:up/m.test(roles[i]),
          );
          if (ok) settled = byPort(primaryPort);
          return ok;
        },
        timeoutMs,
        `the Sentinel group "${name}" did not settle (one primary named by every sentinel, every other live server replicating it)`,
      );
      return settled!;
    },
    stop: () => stopAll([...sentinels, ...servers]),
  };
}

interface SentinelView {
  primaryPort: number;
  replicas: number;
  otherSentinels: number;
}

/** What one sentinel says about the group: `SENTINEL MASTER <name>` as a flat field list. */
async function sentinelView(sentinel: RedisServerHandle, name: string): Promise<SentinelView> {
  const addr = await sentinelCommand(sentinel, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name]);
  const fields = await sentinelCommand(sentinel, ['SENTINEL', 'MASTER', name]);
  const get = (field: string): number => {
    const i = fields.indexOf(field);
    return i >= 0 && i % 2 === 0 ? Number(fields[i + 1]) : NaN;
  };
  return {
    primaryPort: Number(addr[1]),
    replicas: get('num-slaves'),
    otherSentinels: get('num-other-sentinels'),
  };
}

/**
 * Sentinel replies are arrays, which `sendCommand` does not read; ioredis would reconnect in the
 * background, so this opens a plain connection per command and parses a flat array of bulk
 * strings and integers.
 */
function sentinelCommand(sentinel: RedisServerHandle, args: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = net.connect({ host: HOST, port: sentinel.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no reply from sentinel ${HOST}:${sentinel.port} within 1 s`));
    }, 1_000);
    const finish = (error: Error | undefined, value?: string[]) => {
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(value!);
    };
    socket.on('error', (error) => finish(error));
    socket.on('connect', () => {
      socket.write(
        `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`,
      );
    });
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('utf8');
      const parsed = parseFlatArray(received);
      if (parsed instanceof Error) finish(parsed);
      else if (parsed) finish(undefined, parsed);
    });
  });
}

/** A flat RESP array (or an error); undefined while incomplete. */
function parseFlatArray(text: string): string[] | Error | undefined {
  if (text.startsWith('-')) return new Error(text.slice(1).split('\r\n')[0]);
  if (!text.startsWith('*')) return new Error(`unexpected sentinel reply ${JSON.stringify(text)}`);
  let pos = text.indexOf('\r\n');
  if (pos < 0) return undefined;
  const count = Number(text.slice(1, pos));
  pos += 2;
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const end = text.indexOf('\r\n', pos);
    if (end < 0) return undefined;
    const head = text.slice(pos, end);
    if (head.startsWith('$')) {
      const len = Number(head.slice(1));
      if (text.length < end + 2 + len + 2) return undefined;
      out.push(text.slice(end + 2, end + 2 + len));
      pos = end + 2 + len + 2;
    } else {
      out.push(head.slice(1));
      pos = end + 2;
    }
  }
  return out;
}

/** Polls `check` every 100 ms until it is true; throws `what` after `timeoutMs`. */
async function untilTrue(
  check: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (performance.now() > deadline) throw new Error(`${what} within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}
