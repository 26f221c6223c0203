/** What a locked call knows about its lock; `LockContext.current()` returns it. */
export interface LockContextInfo {
  /** The keys held (rendered, sorted, without the module's keyPrefix). */
  readonly keys: readonly string[];
  /**
   * Fencing token of the first key: strictly increasing per key across all holders and
   * processes. Store it with what you write and reject writes that carry an older one.
   */
  readonly fence: number;
  /** Fencing token of each key, by key. */
  readonly fences: Readonly<Record<string, number>>;
  /** The slice index under a segmented lock (`segments: N`), else `undefined`. */
  readonly segment?: number;
  /** Aborts with a `LockLostError` reason if the lock is lost while the call still runs. */
  readonly signal: AbortSignal;
  /** `Date.now()` when the lock was acquired. */
  readonly acquiredAt: number;
  /** How long the call waited for the lock, in ms. */
  readonly waitedMs: number;
  /** `'read'` for a shared read hold, else `'write'` (exclusive locks and permits). */
  readonly mode: 'read' | 'write';
  /** How many holders the key admits at once: `permits`, 1 for an exclusive or read hold. */
  readonly permits: number;
}

/** A lock taken with `LockService.acquire`: release it yourself (in a `finally`). */
export interface LockHandle extends LockContextInfo {
  /** Stops renewals and releases the lock. Never throws: a failed release is logged. */
  release(): Promise<void>;
  /**
   * Sets the remaining lease to `ms` from now.
   * @throws LockLostError if the lock is no longer held; LockBackendError if Redis failed.
   */
  extend(ms: number): Promise<void>;
}
