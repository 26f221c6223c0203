import { describeHistoryRun } from '../support/history/describe-history-run';

// Three members: the leader frozen makes them elect another.
describeHistoryRun('etcd', {
  seed: 1,
  durationMs: 7_000,
  kinds: ['server-frozen', 'holder-frozen-long'],
  members: 3,
});
