import { performance } from 'node:perf_hooks';

/**
 * Calls `fn` once `performance.now()` has reached `deadline`, never before: Node's timers run
 * on the event loop's cached millisecond clock and can fire up to a millisecond early, so an
 * early firing waits the rest.
 * @internal
 */
export class DeadlineTimer {
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly deadline: number,
    private readonly fn: () => void,
  ) {
    this.arm();
  }

  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    const left = this.deadline - performance.now();
    this.timer = setTimeout(
      () => {
        if (performance.now() < this.deadline) this.arm();
        else {
          this.timer = undefined;
          this.fn();
        }
      },
      Math.max(0, Math.ceil(left)),
    );
  }
}
