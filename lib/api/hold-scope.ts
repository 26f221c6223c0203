import type { LockContextInfo } from '../interfaces';
import type { HeldChain } from '../lock-order/held-chain';
import type { ActiveHold } from './active-hold';
import type { HoldRecord, LockScope } from './lock-context';

/**
 * The scope of a locked call, for `LockContext`. A class, not an object literal with a getter:
 * a literal whose getter is a fresh closure gets a hidden class of its own at every call, which
 * slows young-generation GCs several times.
 * @internal
 */
export class HoldScope implements LockScope {
  #info?: LockContextInfo;
  readonly record: HoldRecord;

  constructor(
    private readonly hold: ActiveHold,
    readonly client: string,
    readonly keys: readonly string[],
    readonly parent: LockScope | undefined,
    private readonly segment: number | undefined,
    readonly chain: HeldChain | undefined,
  ) {
    this.record = hold;
  }

  get mode(): 'read' | 'write' {
    return this.hold.mode;
  }

  get permits(): number {
    return this.hold.permits;
  }

  /** Built when someone asks for it (most methods never do). */
  get info(): LockContextInfo {
    return (this.#info ??= new HoldInfo(this.hold, this.segment));
  }
}

/**
 * What `LockContext.current()` and an acquire handle tell about a hold: read from the hold when
 * asked, not copied (a copy of each field, its numbers boxed, cost ~0.1 KiB per handle, and
 * 100,000 handles held at once are normal). `fences` and `signal` are built on first use.
 * @internal
 */
export class HoldInfo implements LockContextInfo {
  readonly #hold: ActiveHold;
  #fences?: Readonly<Record<string, number>>;
  readonly segment?: number;

  constructor(hold: ActiveHold, segment?: number) {
    this.#hold = hold;
    this.segment = segment;
  }

  get keys(): readonly string[] {
    return this.#hold.lease.keys;
  }

  get fence(): number {
    return this.#hold.lease.fences[0];
  }

  get acquiredAt(): number {
    return this.#hold.lease.acquiredAt;
  }

  get waitedMs(): number {
    return this.#hold.lease.waitedMs;
  }

  get mode(): 'read' | 'write' {
    return this.#hold.mode;
  }

  get permits(): number {
    return this.#hold.permits;
  }

  /**
   * Built on first use: an object keyed by the lock keys gets a hidden class of its own per
   * key (~0.3 KiB each), which most holders never look at.
   */
  get fences(): Readonly<Record<string, number>> {
    if (!this.#fences) {
      const { lease } = this.#hold;
      // No prototype: a key named '__proto__' is a key like any other.
      const fences = Object.create(null) as Record<string, number>;
      lease.keys.forEach((k, i) => (fences[k] = lease.fences[i]));
      this.#fences = fences;
    }
    return this.#fences;
  }

  /** Created on first use. */
  get signal(): AbortSignal {
    return this.#hold.signal;
  }

  /**
   * What it tells, as plain data (its fields are getters on the prototype, so `JSON.stringify`
   * and a logger see them through this).
   */
  toJSON(): Omit<LockContextInfo, 'signal'> {
    const { keys, fence, fences, segment, acquiredAt, waitedMs, mode, permits } = this;
    return { keys, fence, fences, segment, acquiredAt, waitedMs, mode, permits };
  }

  /** The hold it tells about (for the handle's `release` and `extend`). */
  protected get hold(): ActiveHold {
    return this.#hold;
  }
}
