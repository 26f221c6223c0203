import { Etcd3 } from 'etcd3';
import { etcdBackend } from 'nest-locked/etcd';
import { startEtcdCluster } from '../../test/support/etcd-server';
import type { BenchTarget } from './bench-target';

/** Session lease of the raw floor: the lease a process opens once, as the backend's session. */
const FLOOR_LEASE_SECONDS = 10;

/**
 * etcd in the backends bench: one member on 127.0.0.1 (the test harness's), `@Locked` over
 * `etcdBackend`, and the raw floor: a put bound to a lease granted once, then a delete, two
 * round trips (what the backend's uncontended cycle costs at least: its transaction puts the
 * key and reads the line's first holder in the put's round trip).
 */
export const target: BenchTarget = {
  name: 'etcd',
  floor: 'put (bound to a lease granted once) + delete',
  async start() {
    const etcd = await startEtcdCluster(1);
    return {
      definition: () => etcdBackend({ hosts: etcd.hosts }),
      async rawCycle() {
        const client = new Etcd3({ hosts: etcd.hosts });
        const lease = client.lease(FLOOR_LEASE_SECONDS);
        lease.on('lost', () => undefined);
        const id = await lease.grant();
        return {
          async cycle(key: string) {
            await client.kv.put({ key: Buffer.from(key), value: Buffer.from('w'), lease: id });
            await client.kv.deleteRange({ key: Buffer.from(key) });
          },
          async close() {
            await lease.revoke().catch(() => undefined);
            client.close();
          },
        };
      },
      stop: () => etcd.stop(),
    };
  },
};
