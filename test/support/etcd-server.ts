import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Etcd3, IKeyValue } from 'etcd3';
import { prefixEnd } from '../../lib/etcd/etcd-names';
import {
  removePidRecord,
  removeServerDir,
  SERVER_DIR_PREFIX,
  writePidRecord,
} from './pid-registry';
import { freePorts } from './redis-server';
import { ensureBinary } from './server-binary';

/**
 * Real etcd processes for the etcd suites: a single member or a 3-member cluster, every member
 * on random 127.0.0.1 ports, its data in a temp dir, a PID record each (see pid-registry.ts),
 * stopped by PID. Short heartbeats and elections, so a leader lost is replaced in well under a
 * second, and etcd's minimum lease TTL (1.5 x the election timeout) is 1 s.
 */

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 20_000;
const STOP_GRACE_MS = 3_000;
/** Raft timing of the test members, in ms. */
const HEARTBEAT_MS = 50;
const ELECTION_MS = 500;

/** One etcd member. */
export interface EtcdMember {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  /** `127.0.0.1:<client port>`, what `etcdBackend({ hosts })` takes. */
  readonly host: string;
  /** PID while it runs. */
  pid: number | undefined;
  /** SIGKILL (or `signal`) at once, like a crash. */
  kill(signal?: NodeJS.Signals): void;
  /** Starts it again on the same ports and data (after kill or stop); resolves once it serves. */
  restart(): Promise<void>;
  /** Starts it after `stop` or `kill`, on the same ports and data; resolves once it serves. */
  start(): Promise<void>;
  /** SIGTERM, then SIGKILL after 3 s; resolves once it is gone. */
  stop(): Promise<void>;
}

/** A cluster of 1 or 3 members. */
export interface EtcdCluster {
  readonly members: readonly EtcdMember[];
  /** Every member's `host`, for `etcdBackend({ hosts })`. */
  readonly hosts: string[];
  /** The member that leads right now (asked over HTTP /v3/maintenance/status). */
  leader(): Promise<EtcdMember | undefined>;
  /** Stops every member and removes the data. */
  stop(): Promise<void>;
}

/** The etcd binary; installs etcd-server with apt-get when missing and root. */
export const ensureEtcdBinary = (): string => ensureBinary('etcd', 'etcd-server');

/**
 * Starts `size` members (1 or 3) as one new cluster; resolves once every member is healthy.
 *
 * @example
 * const etcd = await startEtcdCluster(3);
 * const backend = etcdBackend({ hosts: etcd.hosts });
 * await etcd.stop();
 */
export async function startEtcdCluster(size: 1 | 3 = 1): Promise<EtcdCluster> {
  const bin = ensureEtcdBinary();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${SERVER_DIR_PREFIX}etcd-`));
  const ports = await freePorts(size * 2);
  const specs = Array.from({ length: size }, (_, i) => ({
    name: `n${i}`,
    clientPort: ports[2 * i],
    peerPort: ports[2 * i + 1],
  }));
  const initialCluster = specs.map((s) => `${s.name}=http://${HOST}:${s.peerPort}`).join(',');
  const token = path.basename(dir);
  const members = specs.map((spec) => new Member(bin, dir, spec, initialCluster, token));
  try {
    await Promise.all(members.map((m) => m.start()));
  } catch (error) {
    await Promise.all(members.map((m) => m.stop()));
    removeServerDir(dir);
    throw error;
  }
  return {
    members,
    hosts: members.map((m) => m.host),
    leader: async () => {
      for (const member of members) {
        if (member.pid === undefined) continue;
        const status = await requestJson(member.clientPort, '/v3/maintenance/status', 1_000, {});
        const header = status?.header as { member_id?: string } | undefined;
        if (status && header?.member_id === status.leader) return member;
      }
      return undefined;
    },
    stop: async () => {
      // The data goes with them: no clean stop to wait for (a leader told to stop with its
      // peers stopping beside it waits for a leadership transfer until the SIGKILL, 3 s).
      await Promise.all(members.map((m) => m.halt()));
      removeServerDir(dir);
    },
  };
}

class Member implements EtcdMember {
  pid: number | undefined;
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  private child?: ChildProcess;
  private output = '';
  private started = false;

  constructor(
    private readonly bin: string,
    private readonly dir: string,
    spec: { name: string; clientPort: number; peerPort: number },
    private readonly initialCluster: string,
    private readonly token: string,
  ) {
    this.name = spec.name;
    this.clientPort = spec.clientPort;
    this.peerPort = spec.peerPort;
  }

  get host(): string {
    return `${HOST}:${this.clientPort}`;
  }

  async start(): Promise<void> {
    const client = `http://${HOST}:${this.clientPort}`;
    const peer = `http://${HOST}:${this.peerPort}`;
    const args = [
      '--name',
      this.name,
      '--data-dir',
      path.join(this.dir, this.name),
      '--listen-client-urls',
      client,
      '--advertise-client-urls',
      client,
      '--listen-peer-urls',
      peer,
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster',
      this.initialCluster,
      '--initial-cluster-token',
      this.token,
      '--initial-cluster-state',
      this.started ? 'existing' : 'new',
      '--heartbeat-interval',
      String(HEARTBEAT_MS),
      '--election-timeout',
      String(ELECTION_MS),
      '--logger',
      'zap',
      '--log-level',
      'error',
    ];
    const child = spawn(this.bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    this.pid = child.pid;
    if (child.pid !== undefined) writePidRecord(child.pid, this.clientPort, this.dir);
    child.stderr?.on('data', (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-8_192);
    });
    child.once('exit', () => {
      if (child.pid !== undefined) removePidRecord(child.pid);
      if (this.child === child) {
        this.child = undefined;
        this.pid = undefined;
      }
    });
    this.started = true;
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (this.child !== child) {
        throw new Error(`etcd ${this.name} exited before it was ready:\n${this.output}`);
      }
      if (await this.healthy()) return;
      await sleep(50);
    }
    throw new Error(
      `etcd ${this.name} was not healthy within ${READY_TIMEOUT_MS} ms:\n${this.output}`,
    );
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.pid !== undefined) process.kill(this.pid, signal);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    // A stopped member ignores SIGTERM until it runs again.
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }

  /** SIGKILL, and resolves once it is gone. */
  async halt(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  private async healthy(): Promise<boolean> {
    const health = await requestJson(this.clientPort, '/health', 1_000);
    return health?.health === 'true';
  }
}

/** Picks `n` distinct free loopback ports. */

/** One JSON request to a member (a GET, or a POST of `body`); undefined when it fails. */
async function requestJson(
  port: number,
  url: string,
  timeout: number,
  body?: unknown,
): Promise<Record<string, unknown> | undefined> {
  try {
    const res = await fetch(`http://${HOST}:${port}${url}`, {
      ...(body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeout),
    });
    return (await res.json()) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/** The keys of the lines under `prefix`, by create revision (holders and waiters, in order). */
export async function lineKeys(client: Etcd3, prefix: string): Promise<IKeyValue[]> {
  const res = await client.kv.range({
    key: Buffer.from(prefix),
    range_end: prefixEnd(Buffer.from(prefix)),
    sort_order: 'Ascend',
    sort_target: 'Create',
  });
  // Not the cancel marks (`<prefix>\0cancelled/...`): the lines' keys only.
  return res.kvs.filter((kv) => !kv.key.toString().includes('\0'));
}
