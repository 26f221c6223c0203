import { describeHistoryRun } from '../support/history/describe-history-run';

describeHistoryRun('postgres', {
  seed: 1,
  durationMs: 5_000,
  kinds: ['session-killed', 'holder-killed', 'server-frozen'],
});
