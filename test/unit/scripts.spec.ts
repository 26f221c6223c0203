import {
  ACQUIRE,
  EXTEND,
  HANDOFF,
  LET_EXPIRE,
  RAISE_FENCE,
  RELEASE,
  RELEASE_TO,
  REFILL,
  TAKE_ANY,
  TRY,
} from '../../lib/redis/protocol/scripts';
import * as scripts from '../../lib/redis/protocol/scripts';

describe('scripts', () => {
  // Every script the module defines: a new one is checked without being listed here.
  const all = Object.values(scripts);

  it('finds the scripts by reading the module', () => {
    expect(all.map((s) => s.name)).toEqual(expect.arrayContaining(['TRY', 'LET_EXPIRE']));
  });

  it('each is read from its file with every include and constant put in', () => {
    for (const s of all) {
      expect(s.lua).not.toMatch(/@include|\$[A-Z]/);
      expect(s.sha).toMatch(/^[0-9a-f]{40}$/);
    }
    // RELEASE's fast path comes before the functions it does not need (what keeps it cheap).
    expect(RELEASE.lua.indexOf("redis.call('DEL', lock, wait)")).toBeLessThan(
      RELEASE.lua.indexOf('local function'),
    );
  });

  // That each SHA is the one Redis files its Lua under: test/integration/scripts-load.spec.ts.
  it('names are distinct, and so are the scripts', () => {
    expect(new Set(all.map((s) => s.name)).size).toBe(all.length);
    expect(new Set(all.map((s) => s.sha)).size).toBe(all.length);
  });

  describe('TRY decoder', () => {
    it('a number: taken, with its fence (whatever Redis sent)', () => {
      expect(TRY.decode(17)).toEqual({ kind: 'ok', fences: [17] });
      expect(TRY.decode('1795438628934258')).toEqual({ kind: 'ok', fences: [1795438628934258] });
    });

    it('{pttl}: busy with the remaining lease (-1: no expiry)', () => {
      expect(TRY.decode([1234])).toEqual({ kind: 'busy', pttl: 1234 });
      expect(TRY.decode([-1])).toEqual({ kind: 'busy', pttl: -1 });
      expect(TRY.decode([0])).toEqual({ kind: 'busy', pttl: 0 });
    });
  });

  describe('ACQUIRE decoder', () => {
    it('{1, fence...}: taken, one fence per key (numbers, whatever Redis sent)', () => {
      expect(ACQUIRE.decode([1, 17])).toEqual({ kind: 'ok', fences: [17] });
      expect(ACQUIRE.decode([1, 3, 9, 27])).toEqual({ kind: 'ok', fences: [3, 9, 27] });
      expect(ACQUIRE.decode(['1', '5'])).toEqual({ kind: 'ok', fences: [5] });
    });

    it('{0, pttl}: busy with the remaining lease (-1: no expiry)', () => {
      expect(ACQUIRE.decode([0, 1234])).toEqual({ kind: 'busy', pttl: 1234 });
      expect(ACQUIRE.decode([0, -1])).toEqual({ kind: 'busy', pttl: -1 });
      expect(ACQUIRE.decode([0, 0])).toEqual({ kind: 'busy', pttl: 0 });
    });
  });

  it('LET_EXPIRE decodes the count of keys left to expire', () => {
    expect(LET_EXPIRE.decode(2)).toBe(2);
    expect(LET_EXPIRE.decode('0')).toBe(0);
  });

  it('RELEASE decodes the count of keys freed with a published wake-up', () => {
    expect(RELEASE.decode(0)).toBe(0);
    expect(RELEASE.decode(2)).toBe(2);
  });

  describe('RELEASE_TO decoder', () => {
    it('2: granted to another process, with its fence', () => {
      expect(RELEASE_TO.decode([2, 41])).toEqual({ kind: 'granted', fence: 41 });
    });

    it('3: handed to our next caller, with its fence', () => {
      expect(RELEASE_TO.decode([3, 42])).toEqual({ kind: 'handed', fence: 42 });
      expect(RELEASE_TO.decode(['3', '43'])).toEqual({ kind: 'handed', fence: 43 });
    });

    it.each([[[0]], [[0, 0]], [[1, 7]], [[4, 7]]])('%j: not ours', (reply) => {
      expect(RELEASE_TO.decode(reply)).toEqual({ kind: 'notOurs' });
    });
  });

  it('REFILL decoder: {1, fence, others} ok with whether others are queued, {0} not ours', () => {
    expect(REFILL.decode([1, 40, 0])).toEqual({ kind: 'ok', fence: 40, othersQueued: false });
    expect(REFILL.decode([1, 40, 1])).toEqual({ kind: 'ok', fence: 40, othersQueued: true });
    expect(REFILL.decode([0])).toEqual({ kind: 'notOurs' });
  });

  it('HANDOFF decoder: {1, fence...} ok, anything else not ours', () => {
    expect(HANDOFF.decode([1, 8])).toEqual({ kind: 'ok', fences: [8] });
    expect(HANDOFF.decode([1, 8, 9])).toEqual({ kind: 'ok', fences: [8, 9] });
    expect(HANDOFF.decode([0])).toEqual({ kind: 'notOurs' });
    expect(HANDOFF.decode([2, 8])).toEqual({ kind: 'notOurs' });
  });

  it('TAKE_ANY decoder: the 1-based Lua index comes back 0-based, with the fence', () => {
    expect(TAKE_ANY.decode([1, 1, 30])).toEqual({ kind: 'ok', index: 0, fence: 30 });
    expect(TAKE_ANY.decode([1, 4, 31])).toEqual({ kind: 'ok', index: 3, fence: 31 });
    expect(TAKE_ANY.decode(['1', '2', '32'])).toEqual({ kind: 'ok', index: 1, fence: 32 });
  });

  it('TAKE_ANY decoder: {0, pttl} busy with the shortest lease left', () => {
    expect(TAKE_ANY.decode([0, 250])).toEqual({ kind: 'busy', pttl: 250 });
    expect(TAKE_ANY.decode([0, -1])).toEqual({ kind: 'busy', pttl: -1 });
  });

  it('EXTEND decoder: 1 renewed, 2 repaired (put back where missing), anything else lost', () => {
    expect(EXTEND.decode(1)).toBe('renewed');
    expect(EXTEND.decode('1')).toBe('renewed');
    expect(EXTEND.decode(2)).toBe('repaired');
    expect(EXTEND.decode(0)).toBe('lost');
    expect(EXTEND.decode(null)).toBe('lost');
    expect(EXTEND.decode(3)).toBe('lost');
  });

  it('RAISE_FENCE decoder: nothing to read', () => {
    expect(RAISE_FENCE.decode([1, 2])).toBeUndefined();
  });
});
