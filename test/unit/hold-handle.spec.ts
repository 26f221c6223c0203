import { ActiveHold, type HoldOwner } from '../../lib/api/active-hold';
import { HoldHandle } from '../../lib/api/hold-handle';
import type { LockBackend } from '../../lib/core/lock-backend';
import { Lease } from '../../lib/core/lease';
import { LockConfigError, LockLostError } from '../../lib/errors';

/** A hold of keys a and b, fences 41 and 42, whose client renews while `renews` says so. */
function held(renews = true) {
  // A lease's acquiredAt is the epoch clock when it is made.
  jest.spyOn(Date, 'now').mockReturnValueOnce(1_700_000_000_000);
  const lease = new Lease(['a', 'b'], 'p.1', [41, 42], 1_000, 1e12, 12.5);
  const extend = jest.fn(async () => renews);
  const client = { name: 'default', extend } as unknown as LockBackend;
  const finish = jest.fn(async () => undefined);
  const owner: HoldOwner = { lost: () => undefined, finish, leave: (_hold, done) => done() };
  const hold = new ActiveHold(lease, client, owner);
  hold.mode = 'read';
  return { hold, lease, extend, finish };
}

describe('HoldHandle', () => {
  it('serializes what it tells (its fields are getters): JSON.stringify and loggers see them', () => {
    const { hold } = held();
    expect(JSON.parse(JSON.stringify(new HoldHandle(hold)))).toEqual({
      keys: ['a', 'b'],
      fence: 41,
      fences: { a: 41, b: 42 },
      acquiredAt: 1_700_000_000_000,
      waitedMs: 12.5,
      mode: 'read',
      permits: 1,
    });
  });

  it('tells the hold: keys, fence, fences, acquiredAt, waitedMs, mode, permits, segment', () => {
    const { hold } = held();
    const handle = new HoldHandle(hold);
    expect(handle.keys).toEqual(['a', 'b']);
    expect(handle.fence).toBe(41);
    expect(handle.fences).toEqual({ a: 41, b: 42 });
    expect(handle.acquiredAt).toBe(1_700_000_000_000);
    expect(handle.waitedMs).toBe(12.5);
    expect(handle.mode).toBe('read');
    expect(handle.permits).toBe(1);
    expect(handle.segment).toBeUndefined();
    // Destructuring works as on a plain object.
    const { keys, fence, signal } = handle;
    expect([keys, fence, signal.aborted]).toEqual([['a', 'b'], 41, false]);
  });

  it('release and extend work detached from the handle, and stay the same functions', async () => {
    const { hold, lease, extend, finish } = held();
    const handle = new HoldHandle(hold);
    const { release, extend: extendBy } = handle;
    expect(handle.release).toBe(release);
    expect(handle.extend).toBe(extendBy);
    await extendBy(5_000);
    expect(extend).toHaveBeenCalledWith(lease, 5_000);
    await release();
    expect(finish).toHaveBeenCalledWith(hold);
  });

  it('extend: a bad ms is a LockConfigError; a lost lock a LockLostError', async () => {
    const handle = new HoldHandle(held(false).hold);
    await expect(handle.extend(5)).rejects.toBeInstanceOf(LockConfigError);
    await expect(handle.extend(1.5)).rejects.toBeInstanceOf(LockConfigError);
    await expect(handle.extend(5_000)).rejects.toBeInstanceOf(LockLostError);
  });
});
