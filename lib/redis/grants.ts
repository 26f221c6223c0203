import { performance } from 'node:perf_hooks';
import type { Grant, KeySpace } from './protocol/key-space';
import type { LockProtocol, Taken } from './protocol/lock-protocol';
import type { KeyLines } from './key-lines';
import type { RedisTaker } from './redis-lease';
import type { LockCounts, Share } from '../core/lock-backend';
import type { SharedHolds } from './shared-holds';
import { shareArg } from './shared-wait';
import type { Tokens } from './tokens';
import type { GrantedKey, Waiter } from './waiter';

/** What the grants take of the engine that owns them (`RedisLockBackend`). @internal */
export interface GrantsEngine {
  readonly space: Pick<KeySpace, 'parseGrant' | 'parseWriterNotice'>;
  readonly protocol: Pick<LockProtocol, 'claim' | 'abandon'>;
  readonly tokens: Pick<Tokens, 'holds'>;
  readonly lines: Pick<KeyLines<Waiter>, 'get'>;
  readonly stats: LockCounts;
  /** The shared holds (built after the grants: asked for when a grant comes). */
  shared(): Pick<SharedHolds, 'grantee'>;
}

/**
 * Where a grant goes in one engine. A release (single node) gives a key or a share to the next
 * token queued in Redis and says so on the grantee's group channel; a grant to a token of this
 * process reaches its waiter here, and the waiter holds the key once its claim (a renewal from
 * the claim window to its full lease) is confirmed (`granted`, `claim`). That is the one way a
 * grant becomes a hold: holding before the claim (by the server's clock, or from the release's
 * answer) gained nothing on the bench (docs/ARCHITECTURE.md, "Fast paths").
 * @internal
 */
export class Grants {
  constructor(private readonly engine: GrantsEngine) {}

  /** A message on this group's channel: a grant, or a notice that a writer waits. */
  message(message: string): void {
    const { engine } = this;
    const grant = engine.space.parseGrant(message);
    if (!grant) {
      const key = engine.space.parseWriterNotice(message);
      if (key === undefined) return;
      // A waiter of another process queued for a key a share or a token of ours holds.
      engine.lines.get(key)?.othersWait();
      return;
    }
    engine.stats.grants++;
    this.granted(grant);
  }

  /**
   * A release granted a key to a token of ours: its waiter confirms the grant (claims it) before
   * it holds the key; with no waiter left, the key is given back.
   */
  private granted(grant: Grant): void {
    const { engine } = this;
    const { key, token } = grant;
    if (engine.tokens.holds(token)) return; // already taken by a retry that found it ours
    const share = engine.shared().grantee(token);
    if (share) return share.message(grant);
    const waiter = engine.lines.get(key)?.waiterOf(token);
    // Its waiter left (timed out) after the grant: pass the key on.
    if (!waiter?.granted(grant)) engine.protocol.abandon([key], token);
  }

  /**
   * Confirms a grant: renews the key from its claim window to the taker's lease, timed from
   * the moment the claim is sent (as any round). The hold's fences are those of the grant the
   * claim found: the message's when the key's counter ends its block (the grant reserved its
   * fence and `spare` more), else the counter alone, with no spare ones (a grant made again
   * meanwhile, after the first was undone or lost in a failover and the token queued again: the
   * message's fence is older than the holders' in between, and the new grant's block, reserved
   * by another release, may be another size).
   */
  async claim(
    keys: readonly string[],
    taker: RedisTaker,
    grant: GrantedKey,
    share?: Share,
  ): Promise<Taken | undefined> {
    const start = performance.now();
    const { token, ttl, acks } = taker;
    const counter = await this.engine.protocol.claim(keys, token, ttl, acks, shareArg(share));
    if (counter === false) return undefined;
    const { fence, spare } =
      counter === 0 || counter - grant.spare === grant.fence ? grant : { fence: counter, spare: 0 };
    return { kind: 'ok', fences: [fence], start, spare, uncontended: false };
  }
}
