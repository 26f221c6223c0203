import type { ReleaseGrant } from '../../redis/lock-protocol';
import type { SharedGrantee } from '../shared-wait';
import type { GrantedKey } from '../waiter';

/** A waiter of this process that a release's answer may hand its grant to. @internal */
export interface AnsweredWaiter {
  /** See `Waiter.answered`: holds from `sentAt` for the claim window, unless busy claiming. */
  answered(grant: GrantedKey, sentAt: number): void;
}

/** Where the grantees of a release's answer are found (the engine's lines and shared holds). */
export interface ReleaseAnswerGrantees {
  /** The shared wait of this process queued under `token`, if any. */
  shared(token: string): SharedGrantee | undefined;
  /** The waiter of this process in `key`'s line under `token`, if any. */
  waiter(key: string, token: string): AnsweredWaiter | undefined;
}

/**
 * Policy `holdFromReleaseAnswer`: a release this process sent at `sentAt` granted locks or
 * shares (its answer says which): those of waiters of this process hold from the answer, not
 * from the grant message (the claim window began after `sentAt`); the claim follows beside the
 * holder, a third of the way into the window (`claimBeside`). Without it the grantee waits for
 * the grant message and claims it, as one of another process does.
 *
 * Built by `Grants` only when its switch is on (`EnginePolicies.holdFromReleaseAnswer`, checked
 * there once); each release's answer is then passed here. Dropping the policy is
 * deleting this file, that switch and the `answered` hooks it calls (`Waiter.answered`,
 * `SharedGrantee.answered`).
 * @internal
 */
export class HoldFromReleaseAnswer {
  constructor(private readonly grantees: ReleaseAnswerGrantees) {}

  /** A release of `keys` sent at `sentAt` answered that it granted `grants`. */
  answered(keys: readonly string[], grants: readonly ReleaseGrant[], sentAt: number): void {
    for (const grant of grants) {
      const shared = this.grantees.shared(grant.token);
      if (shared) shared.answered(grant.fence, sentAt);
      // Of a release of several keys, which key was granted is not said: only one key's is held.
      else if (keys.length === 1)
        this.grantees.waiter(keys[0], grant.token)?.answered(grant, sentAt);
    }
  }
}
