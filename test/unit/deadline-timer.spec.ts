import { DeadlineTimer } from '../../lib/core/deadline-timer';
import { type ManualClock, manualPerformanceNow } from './support/clock';

describe('DeadlineTimer', () => {
  // The timers and performance.now() are driven separately, so the timer can run ahead of the
  // clock the deadline is on (as Node's cached loop time lets it).
  let clock: ManualClock;
  beforeEach(() => {
    jest.useFakeTimers();
    clock = manualPerformanceNow(1_000);
  });
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it('fires once the clock reaches the deadline', () => {
    const fn = jest.fn();
    new DeadlineTimer(1_050, { onDeadline: fn });
    jest.advanceTimersByTime(49);
    expect(fn).not.toHaveBeenCalled();
    clock.set(1_050);
    jest.advanceTimersByTime(1);
    expect(fn).toHaveBeenCalledTimes(1);
    clock.advance(5_000);
    jest.advanceTimersByTime(5_000);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('never fires before the deadline while the clock lags the timers', () => {
    const fn = jest.fn();
    const deadline = 1_050;
    const seenAt: number[] = [];
    new DeadlineTimer(deadline, {
      onDeadline: () => {
        seenAt.push(clock.now());
        fn();
      },
    });
    // The timer's 50 ms pass, the clock says only 49.5 of them did.
    clock.set(1_049.5);
    jest.advanceTimersByTime(50);
    expect(fn).not.toHaveBeenCalled();
    // It waits the rest, and keeps waiting while the clock stays short of the deadline.
    jest.advanceTimersByTime(1);
    expect(fn).not.toHaveBeenCalled();
    clock.set(1_049.999);
    jest.advanceTimersByTime(10);
    expect(fn).not.toHaveBeenCalled();
    clock.set(deadline);
    jest.advanceTimersByTime(1);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(seenAt[0]).toBeGreaterThanOrEqual(deadline);
  });

  it('a fractional deadline is waited for in whole ms, rounded up', () => {
    const fn = jest.fn();
    new DeadlineTimer(1_010.2, { onDeadline: fn });
    clock.set(1_010.2);
    jest.advanceTimersByTime(10);
    expect(fn).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('a deadline already past fires on the next turn, not synchronously', () => {
    const fn = jest.fn();
    new DeadlineTimer(900, { onDeadline: fn });
    expect(fn).not.toHaveBeenCalled();
    jest.advanceTimersByTime(0);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('cancel() before the deadline: never fires', () => {
    const fn = jest.fn();
    const t = new DeadlineTimer(1_020, { onDeadline: fn });
    jest.advanceTimersByTime(10);
    t.cancel();
    clock.set(2_000);
    jest.advanceTimersByTime(2_000);
    expect(fn).not.toHaveBeenCalled();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('cancel() while it waits out a lagging clock: never fires', () => {
    const fn = jest.fn();
    const t = new DeadlineTimer(1_020, { onDeadline: fn });
    clock.set(1_019.5);
    jest.advanceTimersByTime(20);
    // Re-armed for the rest.
    expect(jest.getTimerCount()).toBe(1);
    t.cancel();
    clock.set(1_030);
    jest.advanceTimersByTime(100);
    expect(fn).not.toHaveBeenCalled();
    expect(jest.getTimerCount()).toBe(0);
  });
});
