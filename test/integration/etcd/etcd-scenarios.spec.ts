import { describeBackendScenarios } from '../../support/backend-scenarios';
import { startEtcdCluster } from '../../support/etcd-server';

/** The scenarios every backend passes, across 4 OS processes, on a 3-member etcd cluster. */
describeBackendScenarios('etcd', async () => {
  const etcd = await startEtcdCluster(3);
  return {
    spec: { kind: 'etcd', options: { hosts: etcd.hosts, sessionTtl: 5_000 } },
    stop: () => etcd.stop(),
  };
});
