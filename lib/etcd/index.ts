/**
 * `nest-locked/etcd`: locks on etcd. Needs the optional peer `etcd3` (`npm install etcd3`).
 *
 * @example
 * ```ts
 * import { etcdBackend } from 'nest-locked/etcd';
 *
 * RedlockModule.forRoot({ backend: etcdBackend({ hosts: '127.0.0.1:2379' }) });
 * ```
 */
export { etcdBackend, type EtcdBackendOptions } from './etcd-backend';
