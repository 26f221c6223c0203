import { LockBackendError } from '../../lib/errors';
import { abortReason, MAX_POLL_MS, retryDelay } from '../../lib/core/wait-rules';
import { SHUTTING_DOWN } from '../../lib/core/core.messages';
import { type ManualClock, manualPerformanceNow } from './support/clock';

describe('wait rules', () => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = manualPerformanceNow(10_000);
  });
  afterEach(() => jest.restoreAllMocks());

  const far = () => clock.now() + 60_000;

  describe('retryDelay', () => {
    it('with a lease in Redis: until it runs out, plus 1 ms', () => {
      expect(retryDelay(1, far(), 0)).toBe(2);
      expect(retryDelay(250, far(), 0)).toBe(251);
      expect(retryDelay(MAX_POLL_MS - 1, far(), 0)).toBe(MAX_POLL_MS);
    });

    it('the rounds do not matter while a lease is there', () => {
      expect(retryDelay(250, far(), 9)).toBe(251);
    });

    it('never longer than MAX_POLL_MS (a lost notification costs at most that)', () => {
      expect(MAX_POLL_MS).toBe(1_000);
      expect(retryDelay(MAX_POLL_MS, far(), 0)).toBe(MAX_POLL_MS);
      expect(retryDelay(30_000, far(), 0)).toBe(MAX_POLL_MS);
    });

    it('never past the deadline', () => {
      expect(retryDelay(500, clock.now() + 120, 0)).toBe(120);
      expect(retryDelay(-1, clock.now() + 3, 5)).toBe(3);
      clock.advance(100);
      expect(retryDelay(500, clock.now() + 20.5, 0)).toBe(20.5);
    });

    it('never less than 1 ms (deadline reached or past)', () => {
      expect(retryDelay(500, clock.now(), 0)).toBe(1);
      expect(retryDelay(500, clock.now() - 50, 0)).toBe(1);
      expect(retryDelay(0, clock.now() + 0.2, 0)).toBe(1);
      expect(retryDelay(-1, clock.now() - 1, 0)).toBe(1);
    });

    it.each([
      [0, 1],
      [1, 2],
      [2, 4],
      [3, 8],
      [5, 32],
      [9, 512],
      [10, MAX_POLL_MS],
      [11, MAX_POLL_MS],
      [1_000, MAX_POLL_MS],
    ])('no lease (pttl -1 or 0): %i rounds -> %i ms (doubling, capped)', (rounds, ms) => {
      expect(retryDelay(-1, far(), rounds)).toBe(ms);
      expect(retryDelay(0, far(), rounds)).toBe(ms);
      expect(retryDelay(-2, far(), rounds)).toBe(ms);
    });

    it('the back-off grows with the rounds until the cap', () => {
      let last = 0;
      for (let r = 0; r < 20; r++) {
        const d = retryDelay(-1, far(), r);
        expect(d).toBeGreaterThanOrEqual(last);
        expect(d).toBeLessThanOrEqual(MAX_POLL_MS);
        last = d;
      }
      expect(last).toBe(MAX_POLL_MS);
    });
  });

  describe('abortReason', () => {
    it("an aborted signal's reason", () => {
      const c = new AbortController();
      const reason = new Error('caller gave up');
      c.abort(reason);
      expect(abortReason(['k'], c.signal)).toBe(reason);
    });

    it('otherwise (no signal, or one not aborted): the client is shutting down', () => {
      for (const signal of [undefined, new AbortController().signal]) {
        const reason = abortReason(['a', 'b'], signal);
        expect(reason).toBeInstanceOf(LockBackendError);
        expect((reason as LockBackendError).keys).toEqual(['a', 'b']);
        expect((reason as LockBackendError).failures[0].message).toBe(SHUTTING_DOWN);
      }
    });
  });
});
