import type { KeyCounts } from './key-counts';

/**
 * When this process last heard that a writer of any process waits for a key: a `w` notice on
 * its grant channel, or a release's answer that granted its readers up to a queued writer. Kept
 * only while shared waits of this process are queued in Redis for the key (`waits`): a share
 * granted to one of them takes no joining readers when a writer was heard after it asked, since
 * the notice can come before the grant is held (a claim still on its way), when no share of the
 * process is there yet to shut.
 * @internal
 */
export class WriterNotices {
  private readonly heard = new Map<string, number>();

  constructor(private readonly waits: KeyCounts) {}

  /** A writer waits for `key`, heard at `at` (performance.now() clock). */
  writerHeard(key: string, at: number): void {
    if (this.waits.has(key)) this.heard.set(key, at);
  }

  /** Whether a writer was heard waiting for `key` at or after `time`. */
  heardSince(key: string, time: number): boolean {
    const at = this.heard.get(key);
    return at !== undefined && at >= time;
  }

  /** A shared wait for `key` ended: with none left queued, its notice goes. */
  waitEnded(key: string): void {
    if (!this.waits.has(key)) this.heard.delete(key);
  }
}
