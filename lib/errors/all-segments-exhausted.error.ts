import { ALL_SEGMENTS_EXHAUSTED } from './error.messages';
import { LockError } from './lock.error';

/**
 * Every slice of a segmented lock was tried and none could serve the call (each threw
 * `SegmentExhaustedError` or was remembered as exhausted). Over HTTP: 409.
 *
 * @publicApi
 */
export class AllSegmentsExhaustedError extends LockError {
  constructor(
    keys: readonly string[],
    readonly segments: number,
    cause?: unknown,
  ) {
    super(ALL_SEGMENTS_EXHAUSTED(keys, segments), keys, cause);
  }
}
