/** The messages of `nest-locked/board` (`board/`). */

export const BOARD_NEEDS_GUARD =
  'LockBoardModule.forRoot: give a `guard` (a function that says who may see the board), or say `public: true` to mount it open to anyone who can reach the app.';
export const BOARD_ACTIONS_NEED_GUARD =
  'LockBoardModule.forRoot: `actions: true` (force release) needs a `guard`; `public: true` is not enough to let anyone release locks.';
export const BOARD_PUBLIC = (path: string) =>
  `The lock board at ${path} is public (public: true): anyone who can reach this app sees every lock key and instance. Give it a guard in production.`;
export const BOARD_BAD_PATH = (path: unknown) =>
  `LockBoardModule.forRoot: path must start with "/" and name a route such as "/locks", got ${JSON.stringify(path)}.`;
export const BOARD_BAD_NUMBER = (field: string, value: unknown, min: number) =>
  `LockBoardModule.forRoot: ${field} must be an integer of at least ${min}, got ${JSON.stringify(value)}.`;
export const BOARD_UNSUPPORTED_PLATFORM = (type: string) =>
  `LockBoardModule: the HTTP platform "${type}" is not supported; the board mounts on Express and Fastify.`;
export const BOARD_NO_HTTP = (instance: string) =>
  `LockBoardModule: no HTTP server in this application, so the page is not mounted here; instance "${instance}" publishes its holds, waiters and events, and the page of any other instance shows them.`;
export const BOARD_PUBLISH_FAILED = (group: string, reason: string) =>
  `lock board: could not publish this instance's view to group "${group}" (${reason}); retrying.`;
export const BOARD_RELEASE_NOT_HELD = (key: string) => `"${key}" is not held: nothing to release.`;
export const BOARD_RELEASE_UNSUPPORTED = (group: string, backend: string) =>
  `Group "${group}" runs on ${backend}, whose locks live in one process: the board cannot force-release them; release them in that process.`;
export const BOARD_EMPTY_PASSWORD =
  'lockBoardBasicAuth: the password is empty; set it (from an environment variable or a secret) so the board is not open to anyone.';
export const BOARD_RELEASE_UNCONFIRMED =
  'Force release needs confirm=<the key>, the key typed again.';
