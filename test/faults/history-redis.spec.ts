import { describeHistoryRun } from '../support/history/describe-history-run';

describeHistoryRun('redis', {
  seed: 1,
  durationMs: 5_000,
  kinds: ['holder-frozen-long', 'server-restarted', 'connection-killed'],
});
