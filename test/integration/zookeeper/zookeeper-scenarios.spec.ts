import { describeBackendScenarios } from '../../support/backend-scenarios';
import { startZooKeeper } from '../../support/zookeeper-server';

/** The scenarios every backend passes, on one ZooKeeper member, across 4 OS processes. */
describeBackendScenarios('zookeeper', async () => {
  const zk = await startZooKeeper();
  return {
    spec: {
      kind: 'zookeeper',
      options: { connectString: zk.connectString, sessionTimeout: 4_000 },
    },
    stop: () => zk.stop(),
  };
});
