import { ActiveHold, type HoldOwner } from '../../lib/api/active-hold';
import type { LockBackend } from '../../lib/core/lock-backend';
import { Lease } from '../../lib/core/lease';
import { LockLostError } from '../../lib/errors';

const lease = () => new Lease(['k'], 'p.1', [7], 1_000, 1e12, 0);
const client = { name: 'default' } as LockBackend;

/** An owner that records what its holds call back. */
function owner() {
  const lost: [ActiveHold, LockLostError][] = [];
  const finished: ActiveHold[] = [];
  const o: HoldOwner = {
    lost: (hold, error) => void lost.push([hold, error]),
    finish: async (hold) => void finished.push(hold),
    leave: (_hold, done) => done(),
  };
  return { o, lost, finished };
}

describe('ActiveHold', () => {
  describe('its signal, created on first use', () => {
    it('is not made until asked for', () => {
      const hold = new ActiveHold(lease(), client, owner().o);
      expect((hold as unknown as { controller?: AbortController }).controller).toBeUndefined();
      expect(hold.signal.aborted).toBe(false);
      expect(hold.signal).toBe(hold.signal);
    });

    it('made before the loss: aborts with the LockLostError', () => {
      const hold = new ActiveHold(lease(), client, owner().o);
      const signal = hold.signal;
      const error = new LockLostError(['k'], 'lost');
      hold.abort(error);
      expect(signal.aborted).toBe(true);
      expect(signal.reason).toBe(error);
    });

    it('made after the loss: born aborted, with the reason of the loss', () => {
      const hold = new ActiveHold(lease(), client, owner().o);
      const error = new LockLostError(['k'], 'expired');
      hold.abort(error);
      expect(hold.signal.aborted).toBe(true);
      expect(hold.signal.reason).toBe(error);
    });

    it('aborts once: the first reason stands, asked for before or after', () => {
      const first = new LockLostError(['k'], 'lost');
      const second = new LockLostError(['k'], 'shutdown');
      const early = new ActiveHold(lease(), client, owner().o);
      const signal = early.signal;
      early.abort(first);
      early.abort(second);
      expect(signal.reason).toBe(first);
      const late = new ActiveHold(lease(), client, owner().o);
      late.abort(first);
      late.abort(second);
      expect(late.signal.reason).toBe(first);
    });
  });

  it('is its own reentrancy record: active until finished', () => {
    const hold = new ActiveHold(lease(), client, owner().o);
    expect(hold.active).toBe(true);
  });

  it('calls its owner back with itself: a loss from its watchdog, and its release', async () => {
    const { o, lost, finished } = owner();
    const hold = new ActiveHold(lease(), client, o);
    const error = new LockLostError(['k'], 'lost');
    hold.onLost(error);
    expect(lost).toEqual([[hold, error]]);
    await hold.release();
    expect(finished).toEqual([hold]);
  });
});
