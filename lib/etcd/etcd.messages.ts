import { describeValue } from '../redlock.messages';

/** The messages of `nest-locked/etcd` (`etcd/`). */

export const ETCD_SESSION_LOST = (cause?: Error) =>
  `the etcd session lease of this process was lost${cause ? ` (${cause.message})` : ''}; ` +
  'its holds and waiting places are gone, the next call opens a new session';

export const ETCD_WAITING_KEY_GONE =
  'a waiting key of this session was deleted in etcd while it waited: its lease was revoked or ' +
  'ran out, or someone deleted the key';

export const ETCD_ACQUIRE_ABANDONED =
  'the acquire was abandoned after an earlier try of it failed, before etcd applied it';

export const ETCD_BAD_HOSTS = (hosts: unknown) =>
  `etcdBackend: hosts must be an etcd endpoint ("127.0.0.1:2379", "http://10.0.0.1:2379") or a ` +
  `non-empty array of them, got ${describeValue(hosts)}.`;

export const ETCD_HOSTS_OR_CLIENT =
  'etcdBackend: give either hosts (the backend builds and closes its client) or client (an Etcd3 ' +
  'of yours, never closed by the backend), not both and not neither.';

export const ETCD_BAD_SESSION_TTL = (ttl: unknown) =>
  `etcdBackend: sessionTtl must be an integer number of ms from 1000 to 3600000 (it is rounded ` +
  `up to whole seconds, etcd's unit), got ${describeValue(ttl)}.`;

export const ETCD_UNKNOWN_OPTION = (name: string) =>
  `etcdBackend: unknown option "${name}"; the options are hosts, client, sessionTtl and ` +
  'clientOptions.';

export const ETCD_STARTED = (group: string, hosts: string, ttl: number) =>
  `Lock group "${group}" uses etcd (${hosts}); a process's holds end ${ttl} s after it stops ` +
  'renewing its session lease.';

// The words of etcd's failures (`EtcdErrors`): `DescribedFailure` adds what to check.

export const ETCD_REFUSED = (hosts: string, detail: string) =>
  `etcd at ${hosts} refused the connection (${detail}).`;

export const ETCD_NO_ANSWER = (hosts: string, detail: string) =>
  `etcd at ${hosts} did not answer in time (${detail}).`;

export const ETCD_AUTH_NEEDED = (hosts: string, detail: string) =>
  `etcd at ${hosts} refused the request (${detail}): it has authentication enabled. Give the ` +
  'user and password in the backend options: etcdBackend({ hosts, clientOptions: { auth: { ' +
  'username, password } } }).';

export const ETCD_CIRCUIT_OPEN = (last: string) =>
  `${last.replace(/\.$/, '')}; etcd3's circuit breaker for that endpoint is open after it, so ` +
  'calls fail at once for a few seconds before the next try.';
