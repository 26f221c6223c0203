import { Etcd3, type IOptions } from 'etcd3';
import { LockConfigError } from '../errors';
import type { LockBackendDefinition } from '../core/lock-backend-definition';
import {
  ETCD_BAD_HOSTS,
  ETCD_BAD_SESSION_TTL,
  ETCD_HOSTS_OR_CLIENT,
  ETCD_STARTED,
  ETCD_UNKNOWN_OPTION,
} from './etcd.messages';
import { EtcdLockBackend } from './etcd-lock-backend';

/** Options of {@link etcdBackend}. */
export interface EtcdBackendOptions {
  /**
   * The etcd endpoints (`'127.0.0.1:2379'`, `'http://10.0.0.1:2379'`, `'https://...'`): every
   * member of the cluster, so that a member down is not a lock down. The backend builds its
   * client from them and closes it with the application.
   */
  readonly hosts?: string | readonly string[];
  /**
   * A client of yours instead of `hosts` (its own hosts, credentials and fault handling): used as
   * it is and never closed by the backend. Health then checks it as one node.
   */
  readonly client?: Etcd3;
  /**
   * The TTL of this process's session lease, in ms (rounded up to whole seconds; etcd may raise
   * it to its own minimum, 1.5 x its election timeout). A process that dies, or is cut off,
   * holds its locks until it runs out; every hold's signal aborts when it is lost.
   * @default 10000
   */
  readonly sessionTtl?: number;
  /** More options of the clients the backend builds from `hosts` (credentials, auth...). */
  readonly clientOptions?: Omit<IOptions, 'hosts'>;
}

const OPTION_NAMES = new Set(['hosts', 'client', 'sessionTtl', 'clientOptions']);
const DEFAULT_SESSION_TTL = 10_000;
const KEEPALIVE = { 'grpc.keepalive_time_ms': 5_000, 'grpc.keepalive_timeout_ms': 2_000 };

/**
 * Locks on etcd (v3 API, through the `etcd3` driver, an optional peer: `npm install etcd3`).
 * Linearizable: the order of the waiters and the fences come from etcd's consensus (the create
 * revision of each hold's key), not from clocks; a hold is a key bound to the session lease of
 * its process. Read locks and permits are supported.
 *
 * @example
 * ```ts
 * import { etcdBackend } from 'nest-locked/etcd';
 *
 * RedlockModule.forRoot({
 *   backend: etcdBackend({ hosts: ['10.0.0.1:2379', '10.0.0.2:2379', '10.0.0.3:2379'] }),
 * });
 * ```
 * @throws LockConfigError when an option is wrong (named in the message)
 */
export function etcdBackend(options: EtcdBackendOptions): LockBackendDefinition {
  const { client, clientOptions } = checkOptions(options);
  const hosts = options.hosts === undefined ? [] : [options.hosts].flat();
  const sessionTtlSeconds = Math.ceil((options.sessionTtl ?? DEFAULT_SESSION_TTL) / 1000);
  return {
    kind: 'etcd',
    supports: { read: true, permits: true },
    create: ({ group, keyPrefix, driftFactor, commandTimeout, logger }) => {
      const build = (endpoints: string | string[]) =>
        new Etcd3({
          ...clientOptions,
          // A member that stops answering (stalled, cut off) fails its streams within ~7 s, so
          // watches and the keep-alive move to another member; 5 s is etcd's shortest allowed.
          grpcOptions: { ...KEEPALIVE, ...clientOptions?.grpcOptions },
          hosts: endpoints,
          // Streams (watches, keep-alives) stay open; every other call ends within commandTimeout.
          defaultCallOptions: (context) =>
            context.isStream ? {} : { deadline: Date.now() + commandTimeout },
        });
      logger.log(ETCD_STARTED(group, hosts.join(', ') || 'a client of yours', sessionTtlSeconds));
      return new EtcdLockBackend(client ?? build(hosts), {
        group,
        keyPrefix,
        driftFactor,
        sessionTtlSeconds,
        hosts,
        endpointClient: (host) => build(host),
        ownsClient: !client,
        commandTimeout,
      });
    },
  };
}

function checkOptions(options: EtcdBackendOptions): EtcdBackendOptions {
  if (typeof options !== 'object' || options === null) {
    throw new LockConfigError(ETCD_HOSTS_OR_CLIENT, 'backend');
  }
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name)) throw new LockConfigError(ETCD_UNKNOWN_OPTION(name), name);
  }
  const { hosts, client, sessionTtl } = options;
  if ((hosts === undefined) === (client === undefined)) {
    throw new LockConfigError(ETCD_HOSTS_OR_CLIENT, hosts === undefined ? 'hosts' : 'client');
  }
  if (hosts !== undefined) {
    const list: unknown[] = Array.isArray(hosts) ? hosts : [hosts];
    if (list.length === 0 || !list.every((h) => typeof h === 'string' && h.trim() !== '')) {
      throw new LockConfigError(ETCD_BAD_HOSTS(hosts), 'hosts');
    }
  }
  if (client !== undefined && typeof (client as Partial<Etcd3> | null)?.kv?.txn !== 'function') {
    throw new LockConfigError(ETCD_HOSTS_OR_CLIENT, 'client');
  }
  if (
    sessionTtl !== undefined &&
    !(Number.isInteger(sessionTtl) && sessionTtl >= 1000 && sessionTtl <= 3_600_000)
  ) {
    throw new LockConfigError(ETCD_BAD_SESSION_TTL(sessionTtl), 'sessionTtl');
  }
  return options;
}
