import { CreateMode } from 'node-zookeeper-client';
import { zookeeperBackend } from 'nest-locked/zookeeper';
import { startZooKeeper } from '../../test/support/zookeeper-server';
import { connectZooKeeper, zkCall as call } from '../zookeeper-client';
import type { BenchTarget } from './bench-target';

const FLOOR_ROOT = '/bench-floor';

/** ZooKeeper 3.8, one member: create an ephemeral node and delete it, one session. */
export const target: BenchTarget = {
  name: 'zookeeper',
  floor: 'create EPHEMERAL + delete, one session',
  async start() {
    const zk = await startZooKeeper();
    return {
      definition: () => zookeeperBackend({ connectString: zk.connectString }),
      async rawCycle() {
        const client = await connectZooKeeper(zk.connectString);
        await call((done) => client.mkdirp(FLOOR_ROOT, (e) => done(e)));
        return {
          async cycle(key: string) {
            const node = `${FLOOR_ROOT}/${encodeURIComponent(key)}`;
            await call((done) => client.create(node, CreateMode.EPHEMERAL, (e) => done(e)));
            await call((done) => client.remove(node, -1, (e) => done(e)));
          },
          close: async () => client.close(),
        };
      },
      stop: () => zk.stop(),
    };
  },
};
