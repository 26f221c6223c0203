import type { LockBackendDefinition } from '../core/lock-backend-definition';
import { LockConfigError } from '../errors';
import { loadOptionalPeer } from '../optional-peer';
import { ZK_BAD_OPTION, ZK_NOT_INSTALLED } from './zookeeper.messages';
import { ZooKeeperLockBackend } from './zookeeper-lock-backend';
import type { ZooKeeperDriver } from './zookeeper-session';

/** Options of `zookeeperBackend`. */
export interface ZooKeeperBackendOptions {
  /**
   * The ensemble: `host:port` of each member, comma-separated, optionally followed by a chroot
   * (`zk1:2181,zk2:2181,zk3:2181/apps/orders`).
   */
  readonly connectString: string;
  /**
   * The session timeout to ask for, in ms (default 10,000; the ensemble clamps it between 2 and
   * 20 ticks). The session is the lease of every hold of the group: a process that stops
   * answering (killed, frozen, cut off) loses its locks this long after its last heartbeat.
   */
  readonly sessionTimeout?: number;
  /** How long `start()` waits for a first connection, in ms (default 10,000). */
  readonly connectTimeout?: number;
  /** The persistent node under which each key gets its parent (default `/nest-locked`). */
  readonly root?: string;
  /**
   * How long a key's parent node stays after its last use by this process, in ms (default
   * 1,000): kept across back-to-back locks of a key (no create and delete of the parent per
   * lock), deleted once idle so parents of idle keys do not pile up.
   */
  readonly parentCleanupDelay?: number;
}

/** Defaults of `zookeeperBackend`, merged in one place. */
const DEFAULTS = Object.freeze({
  sessionTimeout: 10_000,
  connectTimeout: 10_000,
  root: '/nest-locked',
  parentCleanupDelay: 1_000,
});

const MEMBER = /^[^\s,/]+:\d{1,5}$/;
const ROOT = /^(\/[^/\s]+)+$/;

/**
 * Locks of a group on ZooKeeper (3.5+): the ZooKeeper lock recipe (ephemeral sequential nodes,
 * each waiter watching only the node whose leaving lets it in), fences from ZooKeeper's own
 * transaction ids, the session as the lease, read/write and permits. Needs the
 * `node-zookeeper-client` package (an optional peer).
 *
 * @example
 * ```ts
 * import { zookeeperBackend } from 'nest-locked/zookeeper';
 *
 * RedlockModule.forRoot({
 *   backend: zookeeperBackend({ connectString: 'zk1:2181,zk2:2181,zk3:2181', sessionTimeout: 10_000 }),
 * });
 * ```
 * @throws LockConfigError for a bad option, or when node-zookeeper-client is not installed
 */
export function zookeeperBackend(options: ZooKeeperBackendOptions): LockBackendDefinition {
  const resolved = resolve(options);
  const zk = loadOptionalPeer<ZooKeeperDriver>('node-zookeeper-client');
  if (!zk) throw new LockConfigError(ZK_NOT_INSTALLED, 'backend');
  return {
    kind: 'zookeeper',
    supports: { read: true, permits: true },
    create: ({ group, keyPrefix, driftFactor, commandTimeout }) =>
      new ZooKeeperLockBackend(zk, {
        ...resolved,
        name: group,
        keyPrefix,
        driftFactor,
        commandTimeout,
      }),
  };
}

function resolve(options: ZooKeeperBackendOptions) {
  if (typeof options !== 'object' || options === null) {
    throw new LockConfigError(ZK_BAD_OPTION('options', options, 'an object'), 'options');
  }
  const { connectString } = options;
  const members = typeof connectString === 'string' ? connectString.replace(/\/.*$/, '') : '';
  const chroot = typeof connectString === 'string' ? connectString.slice(members.length) : '';
  if (!members.split(',').every((m) => MEMBER.test(m.trim())) || (chroot && !ROOT.test(chroot))) {
    throw new LockConfigError(
      ZK_BAD_OPTION('connectString', connectString, "'host:port[,host:port...][/chroot]'"),
      'connectString',
    );
  }
  const merged = { ...DEFAULTS, ...definedOnly(options), connectString };
  for (const field of ['sessionTimeout', 'connectTimeout'] as const) {
    const value = merged[field];
    if (!Number.isInteger(value) || value < 1) {
      throw new LockConfigError(ZK_BAD_OPTION(field, value, 'a whole number of ms >= 1'), field);
    }
  }
  if (!Number.isInteger(merged.parentCleanupDelay) || merged.parentCleanupDelay < 0) {
    throw new LockConfigError(
      ZK_BAD_OPTION('parentCleanupDelay', merged.parentCleanupDelay, 'a whole number of ms >= 0'),
      'parentCleanupDelay',
    );
  }
  if (typeof merged.root !== 'string' || !ROOT.test(merged.root)) {
    throw new LockConfigError(
      ZK_BAD_OPTION('root', merged.root, "an absolute node path such as '/nest-locked'"),
      'root',
    );
  }
  return merged;
}

/** The options the user set (an explicit `undefined` keeps the default). */
function definedOnly(options: ZooKeeperBackendOptions): Partial<ZooKeeperBackendOptions> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}
