import { describeHistoryRun } from '../support/history/describe-history-run';

// One member (three JVMs cost the suite more than the run): freezing it is freezing the leader.
// `npm run check:history -- --backend zookeeper --members 3` runs the ensemble.
describeHistoryRun('zookeeper', {
  seed: 1,
  durationMs: 7_000,
  kinds: ['server-frozen', 'holder-frozen-long'],
  members: 1,
});
