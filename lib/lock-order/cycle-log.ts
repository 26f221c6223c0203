import type { FoundCycle } from './order-report';

/** At most this many cycles are kept for `expectNoLockOrderCycles()` without an argument. */
const KEPT = 100;

/**
 * The lock-order cycles every `LockService` of this process reported since the last
 * `takeCycles()`: what `expectNoLockOrderCycles()` of `nest-locked/testing` checks when it is not
 * told which application to look at (a test suite may build and close several).
 * @internal
 */
const cycles: FoundCycle[] = [];

/** @internal */
export function logCycle(found: FoundCycle): void {
  cycles.push(found);
  if (cycles.length > KEPT) cycles.shift();
}

/** The cycles logged since the last call, oldest first. @internal */
export function takeCycles(): FoundCycle[] {
  return cycles.splice(0);
}
