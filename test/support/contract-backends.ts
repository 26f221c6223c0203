import type { RedlockModuleOptions } from 'nest-locked';
import { etcdBackend } from 'nest-locked/etcd';
import { mysqlBackend } from 'nest-locked/mysql';
import { postgresBackend } from 'nest-locked/postgres';
import { zookeeperBackend } from 'nest-locked/zookeeper';
import { startEtcdCluster } from './etcd-server';
import { startMariadb } from './mariadb-server';
import { startPostgres } from './postgres-server';
import { closedPort, startRedisServers, stopAll, useRedis } from './redis-server';
import { startZooKeeper } from './zookeeper-server';

/**
 * The backends the contract spec (`test/integration/contract/backend-contract.spec.ts`) runs
 * every case against: how to start each one's server for the file, what it supports, and the
 * cases it is known to fail still (`knownDrift`).
 */

/** The cases of the contract (`lib/core/lock-backend.ts`), by name: the table's columns. */
export const CONTRACT_CASES = [
  'exclusion and fences',
  'waits, then busy',
  'unreachable',
  'read fence',
  'multi-key',
  'read/write',
  'permits',
  'share mismatch',
  'unsupported share',
  'lease ends',
  'extend',
  'release',
  'abort',
  'busy answer',
] as const;

export type ContractCase = (typeof CONTRACT_CASES)[number];

/** A backend's server(s), started for the file. */
export interface ContractServer {
  /** Module options that lock on it (`clients` or `backend`). */
  readonly options: RedlockModuleOptions;
  /** Module options naming a server nobody listens on (absent: the backend has no server). */
  unreachable?(): Promise<RedlockModuleOptions>;
  stop(): Promise<void>;
}

export interface ContractBackend {
  readonly name: string;
  start(): Promise<ContractServer>;
  /** Read locks and permits (a backend without refuses them with LockConfigError). */
  readonly supports: { readonly read: boolean; readonly permits: boolean };
  /**
   * Its locks live in this process only (memory): the cases' "processes" are one application,
   * and nothing is unreachable.
   */
  readonly oneProcess?: boolean;
  /** How a LockBackendError's message names it (`...: etcd failed (...)`). */
  readonly system?: string;
  /**
   * Cases the backend still fails, each with why: they run as `it.failing`, so the one that
   * starts passing fails the run, and its entry goes (the fix's merge removes it).
   */
  readonly knownDrift?: Partial<Record<ContractCase, string>>;
  /**
   * Where another process's lease left cannot be read from the server, the documented bound a
   * busy answer keeps to instead, and why (README's "busy" row, the backend's page).
   */
  readonly busyAnswerBound?: { readonly ms: number; readonly why: string };
}

/** The server keeps no lease of another process's hold: the answer is the `ttl` asked. */
const TTL_ASKED = { ms: 30_000, why: "no lease of another process's hold on the server" };

export const CONTRACT_BACKENDS: readonly ContractBackend[] = [
  {
    name: 'redis',
    system: 'Redis',
    supports: { read: true, permits: true },
    async start() {
      const server = await useRedis();
      return {
        options: { clients: [server.url] },
        unreachable: async () => ({ clients: [`redis://127.0.0.1:${await closedPort()}`] }),
        stop: () => server.stop(),
      };
    },
  },
  {
    name: 'redis quorum (3)',
    system: 'Redis',
    supports: { read: true, permits: true },
    async start() {
      const servers = await startRedisServers(3);
      return {
        options: { clients: servers.map((s) => s.url) },
        unreachable: async () => ({
          clients: await Promise.all(
            servers.map(async () => `redis://127.0.0.1:${await closedPort()}`),
          ),
        }),
        stop: () => stopAll(servers),
      };
    },
  },
  {
    name: 'memory',
    supports: { read: true, permits: true },
    oneProcess: true,
    start: async () => ({ options: { backend: 'memory' }, stop: async () => undefined }),
  },
  {
    name: 'postgres',
    system: 'PostgreSQL',
    supports: { read: true, permits: true },
    knownDrift: {
      // docs/backends/postgres.md: each caller uses its own slot count (N advisory locks).
      'share mismatch': 'another N, or a read against permits, is not detected',
    },
    busyAnswerBound: TTL_ASKED,
    async start() {
      const pg = await startPostgres();
      return {
        options: { backend: postgresBackend({ ...pg.config }) },
        unreachable: async () => ({
          backend: postgresBackend({ ...pg.config, port: await closedPort() }),
        }),
        stop: () => pg.stop(),
      };
    },
  },
  {
    name: 'mysql (MariaDB)',
    system: 'MySQL',
    supports: { read: false, permits: false },
    busyAnswerBound: TTL_ASKED,
    async start() {
      const db = await startMariadb();
      return {
        options: { backend: mysqlBackend({ ...db.config }) },
        unreachable: async () => ({
          backend: mysqlBackend({ ...db.config, port: await closedPort() }),
        }),
        stop: () => db.stop(),
      };
    },
  },
  {
    name: 'etcd',
    system: 'etcd',
    supports: { read: true, permits: true },
    busyAnswerBound: { ms: 5_000, why: "the holder's session lease (sessionTtl) on etcd" },
    async start() {
      const etcd = await startEtcdCluster(1);
      return {
        options: { backend: etcdBackend({ hosts: etcd.hosts, sessionTtl: 5_000 }) },
        unreachable: async () => ({
          backend: etcdBackend({ hosts: `127.0.0.1:${await closedPort()}` }),
        }),
        stop: () => etcd.stop(),
      };
    },
  },
  {
    name: 'zookeeper',
    system: 'ZooKeeper',
    supports: { read: true, permits: true },
    busyAnswerBound: TTL_ASKED,
    async start() {
      const zk = await startZooKeeper();
      return {
        options: {
          backend: zookeeperBackend({ connectString: zk.connectString, sessionTimeout: 4_000 }),
        },
        unreachable: async () => ({
          backend: zookeeperBackend({
            connectString: `127.0.0.1:${await closedPort()}`,
            connectTimeout: 200,
          }),
        }),
        stop: () => zk.stop(),
      };
    },
  },
];
