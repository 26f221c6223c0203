import { hostname } from 'node:os';
import { LockConfigError } from '../errors';
import {
  BOARD_ACTIONS_NEED_GUARD,
  BOARD_BAD_NUMBER,
  BOARD_BAD_PATH,
  BOARD_NEEDS_GUARD,
} from './board.messages';
import type { LockBoardOptions, ResolvedLockBoardOptions } from './lock-board-options.interface';

/** Token of the resolved board options. @internal */
export const LOCK_BOARD_OPTIONS = Symbol('nest-locked:boardOptions');

/** The defaults, in one place. @internal */
export const BOARD_DEFAULTS = Object.freeze({
  path: '/locks',
  public: false,
  actions: false,
  publishInterval: 1_000,
  expiry: 10_000,
  refreshInterval: 500,
  maxScan: 100_000,
  eventsKept: 1_000,
});

const NUMBERS = {
  publishInterval: 100,
  expiry: 1_000,
  refreshInterval: 100,
  maxScan: 1_000,
  eventsKept: 10,
} as const;

/**
 * The options with defaults, checked: a board without a guard mounts only when `public: true`
 * says so, and force release never without a guard.
 * @throws LockConfigError for a missing guard, a bad path or a bad number
 * @internal
 */
export function resolveBoardOptions(options: LockBoardOptions): ResolvedLockBoardOptions {
  const o = { ...BOARD_DEFAULTS, instance: `${hostname()}:${process.pid}`, ...options };
  if (typeof o.path !== 'string' || !/^\/[^?#\s]*[^/]$/.test(o.path)) {
    throw new LockConfigError(BOARD_BAD_PATH(o.path), 'path');
  }
  if (o.guard !== undefined && typeof o.guard !== 'function') {
    throw new LockConfigError(BOARD_NEEDS_GUARD, 'guard');
  }
  if (!o.guard && o.actions) throw new LockConfigError(BOARD_ACTIONS_NEED_GUARD, 'actions');
  if (!o.guard && o.public !== true) throw new LockConfigError(BOARD_NEEDS_GUARD, 'guard');
  for (const [field, min] of Object.entries(NUMBERS)) {
    const value = o[field as keyof typeof NUMBERS];
    if (!Number.isInteger(value) || value < min) {
      throw new LockConfigError(BOARD_BAD_NUMBER(field, value, min), field);
    }
  }
  return o;
}
