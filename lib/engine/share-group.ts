/**
 * The readers of this process that hold one Redis read share (one token) together: the reader
 * that took it and the later readers of this process that joined it without a round trip. Rules
 * it enforces:
 * - a reader joins only while the share is open: no writer known to wait for the key (a writer
 *   of any process that queues behind readers tells their processes, and a waiting writer of
 *   this process is seen in its key line), not found lost, and valid long enough; once shut it
 *   stays shut, so the writer waits for the readers that hold it now and no later one (the
 *   engine lets readers join only when its process has listened for notices since `askedAt`);
 * - its validity is the latest any holder's renewal established;
 * - the share goes back to Redis when its last holder lets go, and not before; a holder that
 *   asked the key to stay locked (`minHold`) is kept to by that last release.
 * @internal
 */
export class ShareGroup {
  /** Readers holding the share right now. */
  private holders = 1;
  /** Shut to joins: a writer waits, or the share was found lost. */
  private shut = false;
  /** Until when (performance.now() clock) a holder asked the key to stay locked. */
  private keepUntil = -Infinity;

  constructor(
    /** The lease length every holder of the group asked for. */
    readonly ttl: number,
    /**
     * When the share was asked for (performance.now() clock): a writer can queue behind it only
     * later, so its notice is heard if this process has listened since then.
     */
    readonly askedAt: number,
    /** Until when the share is certainly this process's (performance.now() clock). */
    public validUntil: number,
  ) {}

  /**
   * Whether one more reader asking for `ttl` may join: open, the same lease length, and valid at
   * least `fresh` ms more (a reader joining gets what a fresh acquire would give).
   */
  takes(ttl: number, now: number, fresh: number): boolean {
    return !this.shut && ttl === this.ttl && this.validUntil - now >= fresh;
  }

  /** A reader joined: one more holder. */
  joined(): void {
    this.holders++;
  }

  /** A holder's renewal answered: the share is valid until `validUntil` at least. */
  renewed(validUntil: number): void {
    if (validUntil > this.validUntil) this.validUntil = validUntil;
  }

  /** A writer waits for the key, or a holder found the share lost: nobody joins any more. */
  close(): void {
    this.shut = true;
  }

  /** Whether nobody may join any more. */
  get closed(): boolean {
    return this.shut;
  }

  /**
   * A holder let go; `keepMs` > 0: it asked the key to stay locked that long (`minHold`).
   * @returns false while others still hold the share; else how long the key must stay locked
   *   (ms, 0 for a plain release)
   */
  left(now: number, keepMs = 0): number | false {
    if (keepMs > 0) this.keepUntil = Math.max(this.keepUntil, now + keepMs);
    if (--this.holders > 0) return false;
    return Math.max(0, this.keepUntil - now);
  }
}
