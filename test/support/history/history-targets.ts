import type { HistoryFault } from 'nest-locked/testing';
import type { HistoryWorkerConfig } from '../../fixtures/history-worker';
import { startEtcdCluster } from '../etcd-server';
import { startMariadb } from '../mariadb-server';
import { startPostgres } from '../postgres-server';
import { sendCommand, startRedisServers } from '../redis-server';
import { startZooKeeper } from '../zookeeper-server';
import { now } from '../intervals';
import type { PlannedFault, PlannedFaultKind } from './fault-schedule';

/** The backends a history run covers; `memory` is the negative control. */
export const HISTORY_BACKENDS = [
  'redis',
  'redis-quorum',
  'postgres',
  'mysql',
  'etcd',
  'zookeeper',
] as const;
export type HistoryBackendName = (typeof HISTORY_BACKENDS)[number] | 'memory';

/** The lock ttl of every run, in ms. */
export const HISTORY_TTL = 1_000;
/** The session of the etcd and ZooKeeper workers: what a frozen holder keeps its keys for. */
const SESSION_MS = 2_000;

/** One backend under test, its servers started: what workers use, and its own faults. */
export interface HistoryTarget {
  readonly name: HistoryBackendName;
  readonly backend: HistoryWorkerConfig['backend'];
  /** What the checker takes as `lease` (see `HistoryInput.lease`). */
  readonly lease: number;
  /** The faults this backend takes (the holder faults are the run's own). */
  readonly kinds: readonly PlannedFaultKind[];
  /** What the server faults do here, for the report. */
  readonly describe: string;
  /** Injects one server fault (frozen, restarted, session or connection killed); resolves once over. */
  inject(fault: PlannedFault): Promise<HistoryFault[]>;
  stop(): Promise<void>;
}

export interface TargetOptions {
  /** Redis quorum nodes (default 5); etcd and ZooKeeper members (default 3 and 1). */
  members?: number;
}

const HOLDER_FAULTS: PlannedFaultKind[] = [
  'holder-frozen-long',
  'holder-frozen-brief',
  'holder-killed',
];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** SIGSTOP, `ms`, SIGCONT (always), as a fault record. */
async function freeze(
  signal: (s: NodeJS.Signals) => void,
  ms: number,
  node: string,
): Promise<HistoryFault[]> {
  const from = now();
  signal('SIGSTOP');
  try {
    await sleep(ms);
  } finally {
    signal('SIGCONT');
  }
  return [{ kind: 'server-frozen', from, to: now(), node }];
}

/** Runs `restart` as a fault record. */
async function restarted(
  restart: () => Promise<void>,
  node: string,
  forgetsLocks: boolean,
): Promise<HistoryFault[]> {
  const from = now();
  await restart();
  return [{ kind: 'server-restarted', from, to: now(), node, forgetsLocks }];
}

/** Runs `kill` (sessions or connections ended on the server) as a fault record of its span. */
async function killed(
  kind: 'session-killed' | 'connection-killed',
  node: string,
  kill: () => Promise<unknown>,
): Promise<HistoryFault[]> {
  const from = now();
  await kill();
  return [{ kind, from, to: now(), node }];
}

const unknownFault = (name: string, fault: PlannedFault) =>
  new Error(`The ${name} history target cannot inject ${fault.kind}.`);

/** Starts the servers of `name` and returns the target over them. */
export async function startTarget(
  name: HistoryBackendName,
  options: TargetOptions = {},
): Promise<HistoryTarget> {
  switch (name) {
    case 'memory':
      return {
        name,
        backend: { kind: 'memory' },
        lease: HISTORY_TTL,
        kinds: [],
        describe: 'each process its own memory: no server, no server faults',
        inject: (fault) => Promise.reject(unknownFault(name, fault)),
        stop: async () => undefined,
      };
    case 'redis':
    case 'redis-quorum': {
      const count = name === 'redis' ? 1 : (options.members ?? 5);
      const nodes = await startRedisServers(count);
      const node = (pick: number) => nodes[Math.floor(pick * nodes.length)];
      return {
        name,
        backend: { kind: 'redis', clients: nodes.map((n) => n.url) },
        lease: HISTORY_TTL,
        kinds: [...HOLDER_FAULTS, 'server-frozen', 'server-restarted', 'connection-killed'],
        describe:
          `${count} redis-server without persistence; one node SIGSTOPped, SIGKILLed and ` +
          `restarted empty, CLIENT KILL TYPE normal and pubsub`,
        inject: async (fault) => {
          const n = node(fault.pick);
          const label = `redis :${n.port}`;
          switch (fault.kind) {
            case 'server-frozen':
              return freeze((s) => n.kill(s), fault.ms, label);
            case 'server-restarted':
              // Empty after a restart: a single node forgets its locks, one node of a quorum
              // leaves them on the others.
              return restarted(
                async () => {
                  n.kill('SIGKILL');
                  await n.restart();
                },
                label,
                count === 1,
              );
            case 'connection-killed':
              return killed('connection-killed', label, async () => {
                for (const type of ['normal', 'pubsub'])
                  await sendCommand(n.host, n.port, ['CLIENT', 'KILL', 'TYPE', type], 1_000);
              });
            default:
              throw unknownFault(name, fault);
          }
        },
        stop: async () => {
          await Promise.all(nodes.map((n) => n.stop()));
        },
      };
    }
    case 'postgres': {
      const pg = await startPostgres();
      return {
        name,
        backend: { kind: 'postgres', options: { ...pg.config } },
        lease: Infinity,
        kinds: [...HOLDER_FAULTS, 'server-frozen', 'server-restarted', 'session-killed'],
        describe:
          'PostgreSQL 15: every server process SIGSTOPped; restarted (sessions end); ' +
          "pg_terminate_backend of each granted advisory lock's backend",
        inject: async (fault) => {
          switch (fault.kind) {
            case 'server-frozen':
              return freeze((s) => pg.signal(s), fault.ms, 'postgres');
            case 'server-restarted':
              return restarted(() => pg.restart(), 'postgres', true);
            case 'session-killed':
              return killed('session-killed', 'postgres', () =>
                pg.sql(
                  `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted`,
                ),
              );
            default:
              throw unknownFault(name, fault);
          }
        },
        stop: () => pg.stop(),
      };
    }
    case 'mysql': {
      const db = await startMariadb();
      // Fences are UUID_SHORT(), counted from the server's start second: a server started again
      // within the second it started repeats them (docs/backends/mysql.md). A restart is never
      // begun in the second the last start ended.
      let startedBy = Date.now();
      const restart = async () => {
        const nextSecond = Math.floor(startedBy / 1_000) * 1_000 + 1_000;
        if (Date.now() < nextSecond) await sleep(nextSecond - Date.now());
        await db.restart();
        startedBy = Date.now();
      };
      return {
        name,
        backend: { kind: 'mysql', options: { ...db.config } },
        lease: Infinity,
        kinds: [...HOLDER_FAULTS, 'server-frozen', 'server-restarted', 'session-killed'],
        describe:
          'MariaDB: mariadbd SIGSTOPped; restarted (sessions end); KILL CONNECTION of every ' +
          'session of the lock user (holders and waiters)',
        inject: async (fault) => {
          switch (fault.kind) {
            case 'server-frozen':
              return freeze((s) => db.signal(s), fault.ms, 'mariadb');
            case 'server-restarted':
              return restarted(restart, 'mariadb', true);
            case 'session-killed':
              return killed('session-killed', 'mariadb', async () => {
                const sessions = await db.sql<{ ID: number }>(
                  'SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?',
                  [db.config.user],
                );
                for (const { ID } of sessions)
                  await db.sql(`KILL CONNECTION ${Number(ID)}`).catch(() => undefined);
              });
            default:
              throw unknownFault(name, fault);
          }
        },
        stop: () => db.stop(),
      };
    }
    case 'etcd': {
      const size = options.members === 1 ? 1 : 3;
      const etcd = await startEtcdCluster(size);
      return {
        name,
        backend: { kind: 'etcd', options: { hosts: etcd.hosts, sessionTtl: SESSION_MS } },
        lease: SESSION_MS,
        kinds: [...HOLDER_FAULTS, 'server-frozen', 'server-restarted', 'session-killed'],
        describe:
          `${size} etcd member(s): the leader SIGSTOPped; one member SIGKILLed and restarted ` +
          `(its data kept); every lease revoked (/v3/lease/revoke)`,
        inject: async (fault) => {
          switch (fault.kind) {
            case 'server-frozen': {
              const leader = (await etcd.leader()) ?? etcd.members[0];
              return freeze((s) => leader.kill(s), fault.ms, `etcd leader ${leader.name}`);
            }
            case 'server-restarted': {
              const m = etcd.members[Math.floor(fault.pick * etcd.members.length)];
              return restarted(
                async () => {
                  m.kill('SIGKILL');
                  await m.restart();
                },
                `etcd ${m.name}`,
                false,
              );
            }
            case 'session-killed':
              return killed('session-killed', 'etcd', () =>
                revokeEveryLease(etcd.members.find((m) => m.pid !== undefined)!.clientPort),
              );
            default:
              throw unknownFault(name, fault);
          }
        },
        stop: () => etcd.stop(),
      };
    }
    case 'zookeeper': {
      const zk = await startZooKeeper({ members: options.members ?? 1 });
      return {
        name,
        backend: {
          kind: 'zookeeper',
          options: { connectString: zk.connectString, sessionTimeout: SESSION_MS },
        },
        lease: SESSION_MS,
        // No session kill: ZooKeeper has no command that ends a client's session.
        kinds: [...HOLDER_FAULTS, 'server-frozen', 'server-restarted'],
        describe:
          `${zk.members.length} ZooKeeper member(s): the leader SIGSTOPped; one member ` +
          `SIGKILLed and restarted (its data kept); no session kill (no server command for it)`,
        inject: async (fault) => {
          switch (fault.kind) {
            case 'server-frozen': {
              const leader = (await zk.leader()) ?? zk.members[0];
              return freeze((s) => leader.kill(s), fault.ms, `zookeeper leader ${leader.id}`);
            }
            case 'server-restarted': {
              const m = zk.members[Math.floor(fault.pick * zk.members.length)];
              return restarted(
                async () => {
                  m.kill('SIGKILL');
                  await m.restart();
                  await zk.waitServing();
                },
                `zookeeper ${m.id}`,
                false,
              );
            }
            default:
              throw unknownFault(name, fault);
          }
        },
        stop: () => zk.stop(),
      };
    }
  }
}

/** Revokes every lease of an etcd cluster (the sessions' keys go with them), over its JSON API. */
async function revokeEveryLease(port: number): Promise<void> {
  const post = async (url: string, body: unknown) => {
    const res = await fetch(`http://127.0.0.1:${port}${url}`, {
      method: 'POST',
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(2_000),
    });
    return (await res.json()) as { leases?: { ID: string }[] };
  };
  const { leases = [] } = await post('/v3/lease/leases', {});
  await Promise.all(leases.map(({ ID }) => post('/v3/lease/revoke', { ID })));
}
