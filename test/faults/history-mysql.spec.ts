import { describeHistoryRun } from '../support/history/describe-history-run';

describeHistoryRun('mysql', {
  seed: 2,
  durationMs: 5_000,
  kinds: ['holder-frozen-long', 'session-killed', 'server-restarted'],
});
