import { describeHistoryRun } from '../support/history/describe-history-run';

// Five nodes: one frozen or restarted at a time leaves a majority.
describeHistoryRun('redis-quorum', {
  seed: 2,
  durationMs: 5_000,
  kinds: ['holder-frozen-brief', 'server-frozen', 'server-restarted', 'holder-killed'],
});
