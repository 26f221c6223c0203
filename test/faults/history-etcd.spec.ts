import { describeHistoryRun } from '../support/history/describe-history-run';

// Three members: the leader frozen makes them elect another. Every lease revoked early (1.3 s
// in), while callers wait in line: a waiter whose key went with it must not be granted.
describeHistoryRun('etcd', {
  seed: 6,
  durationMs: 8_000,
  kinds: ['session-killed', 'server-frozen', 'holder-frozen-long'],
  members: 3,
});
