/**
 * One waiter's sleep that a nudge can end early. A nudge while awake is remembered, so the next
 * sleep returns at once: no wake-up is lost between two sleeps.
 * @internal
 */
export class WakeLatch {
  private nudge?: () => void;
  private pending = false;

  /** Ends the current sleep ('woken'), or the next one at once. */
  wake(): void {
    const n = this.nudge;
    this.nudge = undefined;
    if (n) n();
    else this.pending = true;
  }

  /** Forgets a remembered nudge. */
  clear(): void {
    this.pending = false;
  }

  /**
   * Sleeps until nudged, with no timer: for a sleep that something is sure to end (a deadline
   * timer of its own, a line that wakes its new head), so thousands of them cost no timers.
   */
  wait(): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => (this.nudge = resolve));
  }

  /** Sleeps `ms` (at least 1) unless nudged first. */
  sleep(ms: number): Promise<'woken' | 'timer'> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve('woken');
    }
    return new Promise((resolve) => {
      const nudge = () => {
        clearTimeout(timer);
        resolve('woken');
      };
      const timer = setTimeout(
        () => {
          if (this.nudge === nudge) this.nudge = undefined;
          resolve('timer');
        },
        Math.max(1, Math.ceil(ms)),
      );
      this.nudge = nudge;
    });
  }
}
