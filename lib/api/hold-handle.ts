import { LockConfigError, LockLostError } from '../errors';
import type { LockHandle } from '../interfaces';
import { inRange } from '../options/number-range';
import { RANGES } from '../options/redlock-options';
import { BAD_OPTION, EXPECTED_NUMBER } from '../options/option.messages';
import type { ActiveHold } from './active-hold';
import { HoldInfo } from './hold-scope';

/**
 * What `LockService.acquire` returns. A class, so every handle shares one hidden class, and its
 * `signal` and `fences` are built only when read (100,000 handles held at once are normal).
 * `release` and `extend` are bound: they may be passed around on their own (each is made when
 * first read, not with every handle).
 * @internal
 */
export class HoldHandle extends HoldInfo implements LockHandle {
  #release?: () => Promise<void>;
  #extend?: (ms: number) => Promise<void>;

  get release(): () => Promise<void> {
    return (this.#release ??= () => this.hold.release());
  }

  get extend(): (ms: number) => Promise<void> {
    return (this.#extend ??= (ms: number) => extendHold(this.hold, ms));
  }
}

async function extendHold(hold: ActiveHold, ms: number): Promise<void> {
  if (!inRange(RANGES.ttl, ms)) {
    throw new LockConfigError(BAD_OPTION('extend(ms)', ms, EXPECTED_NUMBER(RANGES.ttl)), 'extend');
  }
  if (!(await hold.client.extend(hold.lease, ms))) {
    throw new LockLostError(hold.lease.keys, 'lost');
  }
}
