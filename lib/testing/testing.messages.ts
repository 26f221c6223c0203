/** The messages of `nest-locked/testing` (`testing/`). */

export const TESTING_OPTIONS_LABEL = 'RedlockTestingModule.forRoot options';

export const TESTING_EXPECTED = {
  groups: "a non-empty array of lock group names, such as ['default', 'orders']",
  times: 'an integer >= 1, or Infinity (every call until reset())',
  retryAfterMs: 'a number of ms >= 0',
  cause: 'an Error',
} as const;

export const TESTING_CLIENTS =
  `"clients" has no effect in ${TESTING_OPTIONS_LABEL}: RedlockTestingModule keeps its locks in ` +
  `memory and connects to nothing. Name the lock groups your code uses instead: ` +
  `groups: ['default', 'orders'].`;

/** The cause of the LockBackendError every call gets while the test backend is down. */
export const TESTING_BACKEND_DOWN =
  'the lock backend is down (RedlockTestingController.down(); restore() brings it back)';

export const TESTING_NOTHING_TO_LOSE = (key: string) =>
  `RedlockTestingController.lose(${JSON.stringify(key)}): nobody holds this lock right now, so ` +
  `there is nothing to lose. Call it while the locked call runs (a segmented call holds a ` +
  `slice, "<key>:seg:<n>": LockContext.current().keys names it).`;

export const LOCK_ORDER_CYCLES_FOUND = (reports: readonly string[]) =>
  `expectNoLockOrderCycles: ${reports.length} lock-order cycle(s) found, each a deadlock ` +
  `waiting to happen:\n\n${reports.join('\n\n')}`;
