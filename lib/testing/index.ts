export { RedlockTestingModule } from './redlock-testing.module';
export { expectNoLockOrderCycles } from './expect-no-lock-order-cycles';
export type { RedlockTestingModuleOptions } from './redlock-testing.options';
export {
  RedlockTestingController,
  type BusyControlOptions,
  type DownControlOptions,
  type TestingControlTarget,
} from './redlock-testing.controller';
// The history checker (docs/histories.md): pure functions over recorded lock calls.
export { checkHistory } from './history/check-history';
export {
  describeFenceViolation,
  describeOverlap,
  historyTable,
  type HistoryRow,
} from './history/describe-history';
export type {
  FencedWrite,
  FenceViolation,
  HistoryEvent,
  HistoryFault,
  HistoryInput,
  HistoryProcess,
  HistoryReport,
  HistoryStep,
  Hold,
  Overlap,
  OverlapClass,
  Unavailability,
} from './history/history.types';
