import { settleTo } from '../settle-to';
import { KeyCounts } from './key-counts';
import type { Lease } from './lease';
import { type LockCounts, noCounts } from './lock-backend';

/** A wait of this process for its keys, as `LocalLocks` knows it. @internal */
export interface LocalWait {
  readonly keys: readonly string[];
}

/**
 * What this process holds and awaits on a backend whose locks live on the server (the SQL,
 * etcd and ZooKeeper backends): the counts `LockBackend.queueCount`, `queued` and `holds` answer,
 * kept in one place so every backend answers them alike.
 * @internal
 */
export class LocalLocks<W extends LocalWait = LocalWait> {
  private readonly holding = new KeyCounts();
  private readonly waiting = new KeyCounts();
  /** The waits in progress, in the order they started. */
  readonly waits = new Set<W>();

  /** Keys with local holders or waiters right now. */
  get keyCount(): number {
    return new Set([...this.holding.keys(), ...this.waiting.keys()]).size;
  }

  /** Callers of this process waiting for `key` (holders not counted). */
  queued(key: string): number {
    let n = 0;
    for (const wait of this.waits) if (wait.keys.includes(key)) n++;
    return n;
  }

  /** Whether a caller of this process holds `key`. */
  holds(key: string): boolean {
    return this.holding.has(key);
  }

  /** Whether a caller of this process holds or awaits `key` (no walk over the waits). */
  inUse(key: string): boolean {
    return this.holding.has(key) || this.waiting.has(key);
  }

  held(keys: readonly string[]): void {
    for (const key of keys) this.holding.add(key);
  }

  released(keys: readonly string[]): void {
    for (const key of keys) this.holding.remove(key);
  }

  waitStarted(wait: W): void {
    this.waits.add(wait);
    for (const key of wait.keys) this.waiting.add(key);
  }

  waitEnded(wait: W): void {
    if (!this.waits.delete(wait)) return;
    for (const key of wait.keys) this.waiting.remove(key);
  }
}

/**
 * The part of `LockBackend` a backend whose locks live on the server answers alike: the local
 * counts, from `LocalLocks` (extend it and keep `local` up to date), `releaseThen` over
 * `release`, and its `stats`.
 * @internal
 */
export abstract class LocallyCountedBackend<W extends LocalWait = LocalWait> {
  readonly stats: LockCounts = noCounts();
  /** What this process holds and awaits. */
  protected readonly local = new LocalLocks<W>();

  /** Keys with local holders or waiters right now. */
  get queueCount(): number {
    return this.local.keyCount;
  }

  /** Callers of this process waiting for `key` (holders not counted). */
  queued(key: string): number {
    return this.local.queued(key);
  }

  /** Whether a caller of this process holds `key`. */
  holds(key: string): boolean {
    return this.local.holds(key);
  }

  abstract release(lease: Lease): Promise<void>;

  /** `release` answered by callback, once: `error` undefined when it succeeded. */
  releaseThen(lease: Lease, done: (error?: unknown) => void): void {
    settleTo(this.release(lease), done);
  }
}
