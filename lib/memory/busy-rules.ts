/** A `busy` control: the next `remaining` acquisitions of its key find it busy. */
interface BusyRule {
  remaining: number;
  readonly retryAfterMs?: number;
}

/** What a rule answers: a stated Retry-After reaches the caller as it is, a lease left is estimated. */
export interface BusyAnswer {
  readonly retryAfterMs: number;
  readonly stated: boolean;
}

function answer(rule: BusyRule | undefined, ttl: number): BusyAnswer {
  const retryAfterMs = rule?.retryAfterMs;
  return retryAfterMs === undefined
    ? { retryAfterMs: ttl, stated: false }
    : { retryAfterMs, stated: true };
}

/** Slices of a segmented key are `<key>:seg:<n>` (see `sliceKey`): a busy key covers them. */
const SLICE = /^(.*):seg:\d+$/;

/**
 * The `busy` control of `InMemoryBackend` (`nest-locked/testing`): which acquisitions find a key
 * busy, whoever holds it. A rule covers its key and the key's slices; each call it turns away
 * uses it once, a segmented sweep and that call's wait for a slice it found busy together.
 * @internal
 */
export class BusyRules {
  private readonly rules = new Map<string, BusyRule>();
  /**
   * Slices a segmented sweep found busy by a rule: the same call's wait for one of them
   * (`seenBusy`) is turned away too, so one rule use is one call, sweep and wait together.
   */
  private readonly sweptBusy = new Set<string>();

  /** The next `times` acquisitions of `key` (and of its slices) find it busy. */
  set(key: string, times: number, retryAfterMs?: number): void {
    this.rules.set(key, { remaining: times, retryAfterMs });
  }

  /**
   * Whether an acquisition of `keys` is turned away (`seenBusy`: the wait that follows a sweep):
   * its busy answer (the rule's stated Retry-After, else `ttl` as a holder's lease left), or
   * undefined when no rule covers it.
   */
  turnsAway(keys: readonly string[], seenBusy: boolean, ttl: number): BusyAnswer | undefined {
    const rule = this.ruleFor(keys);
    // The wait of a call whose sweep a rule turned away: that use of the rule was this call's.
    if (seenBusy && keys.some((k) => this.sweptBusy.delete(k))) return answer(rule, ttl);
    if (!rule) return undefined;
    this.spend(rule);
    return answer(rule, ttl);
  }

  /** A segmented sweep over `keys`: those a rule turns away (one use of each rule it meets). */
  sweep(keys: readonly string[]): readonly string[] {
    for (const key of keys) this.sweptBusy.delete(key);
    const ruled = keys.filter((k) => this.ruleFor([k]));
    // One sweep is one use of each rule it meets, however many slices the rule covers.
    for (const rule of new Set(ruled.map((k) => this.ruleFor([k])!))) this.spend(rule);
    for (const key of ruled) this.sweptBusy.add(key);
    return ruled;
  }

  /** No rule any more. */
  clear(): void {
    this.rules.clear();
    this.sweptBusy.clear();
  }

  /** The rule that covers one of `keys` (the key itself, or the key a slice belongs to). */
  private ruleFor(keys: readonly string[]): BusyRule | undefined {
    for (const key of keys) {
      const rule = this.rules.get(key) ?? this.rules.get(SLICE.exec(key)?.[1] ?? '');
      if (rule) return rule;
    }
    return undefined;
  }

  /** One use of a rule; used up, it goes. */
  private spend(rule: BusyRule): void {
    if (--rule.remaining > 0) return;
    for (const [key, r] of this.rules) if (r === rule) this.rules.delete(key);
  }
}
