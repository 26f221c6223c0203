import type { INestApplication } from '@nestjs/common';
import { startZooKeeperProxy, type ZooKeeperProxy } from './zookeeper-proxy';
import { startZooKeeper, type ZooKeeperEnsemble } from './zookeeper-server';

/** What a spec file on one ZooKeeper member shares: the member, its apps, its proxies. */
export interface ZooKeeperSuite {
  /** The member (set once the file's `beforeAll` ran). */
  readonly zk: ZooKeeperEnsemble;
  /** Apps a test opened: closed after the file, before the member stops. */
  readonly apps: INestApplication[];
  /** A proxy of the test in front of the member, closed after the file. */
  proxy(): Promise<ZooKeeperProxy>;
}

/**
 * Starts one ZooKeeper member for the spec file that calls it (in its `beforeAll`) and stops it
 * after the file, once the apps and proxies the tests opened are closed.
 */
export function zookeeperSuite(): ZooKeeperSuite {
  let zk: ZooKeeperEnsemble | undefined;
  const apps: INestApplication[] = [];
  const proxies: ZooKeeperProxy[] = [];
  beforeAll(async () => {
    zk = await startZooKeeper();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await Promise.all(proxies.map((proxy) => proxy.close()));
    await zk?.stop();
  });
  return {
    get zk() {
      if (!zk) throw new Error('the ZooKeeper member is not started yet (use it inside a test)');
      return zk;
    },
    apps,
    async proxy() {
      const proxy = await startZooKeeperProxy(this.zk.connectString);
      proxies.push(proxy);
      return proxy;
    },
  };
}
