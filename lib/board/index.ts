// The `nest-locked/board` entry point: nothing of it loads unless the app imports it.
export { LockBoardModule } from './lock-board.module';
export { lockBoardBasicAuth } from './lock-board-basic-auth';
export type {
  LockBoardGuard,
  LockBoardOptions,
  LockBoardRequest,
} from './lock-board-options.interface';
export type {
  BoardHeld,
  BoardHotKey,
  BoardInstance,
  BoardKeyPage,
  BoardLine,
  BoardNode,
  BoardOverview,
  BoardSeries,
  BoardWaiter,
} from './board-pages';
export type { BoardEvent, BoardEventType } from './board-recorder';
