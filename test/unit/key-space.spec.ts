import {
  GRANT_CHANNEL_PREFIX,
  KEYS_PER_LOCK,
  KeySpace,
  RELEASE_CHANNEL_SUFFIX,
} from '../../lib/redis/protocol/key-space';

describe('KeySpace', () => {
  const space = new KeySpace('locks:', false);

  describe('lock keys', () => {
    it('wraps the key in the hash tag after the prefix', () => {
      expect(space.lockKey('product:42')).toBe('locks:{product:42}');
      expect(new KeySpace('', false).lockKey('k')).toBe('{k}');
    });

    it.each(['product:42', '', 'a b c', 'with}brace', 'with{brace', '{x}', 'ünï cødé', ' '])(
      'keyOf(lockKey(%j)) gives the key back',
      (key) => {
        expect(space.keyOf(space.lockKey(key))).toBe(key);
      },
    );

    it.each([
      ['another prefix', 'other:{k}'],
      ['the prefix without its tag', 'locks:k'],
      ['no closing brace', 'locks:{k'],
      ['a companion key', 'locks:{k}:fence'],
      ['the prefix alone', 'locks:'],
      ['empty', ''],
    ])('keyOf is undefined for %s', (_, lockKey) => {
      expect(space.keyOf(lockKey)).toBeUndefined();
    });

    it('a prefix that is a prefix of another does not capture its keys', () => {
      const a = new KeySpace('a', false);
      const ab = new KeySpace('ab', false);
      expect(a.keyOf(ab.lockKey('k'))).toBeUndefined();
      expect(ab.keyOf(a.lockKey('k'))).toBeUndefined();
    });
  });

  it('releaseChannel: the lock key with the release suffix', () => {
    expect(space.releaseChannel('k')).toBe('locks:{k}' + RELEASE_CHANNEL_SUFFIX);
    expect(space.releaseChannel('k')).toBe('locks:{k}:rel');
  });

  it('grantChannel: the grant prefix and the token prefix', () => {
    expect(KeySpace.grantChannel('ab12')).toBe(GRANT_CHANNEL_PREFIX + 'ab12');
    expect(KeySpace.grantChannel('ab12')).toBe('nest-locked:g:ab12');
  });

  describe('parseWriterNotice', () => {
    it('decodes the key of a waiter notice, and nothing else', () => {
      expect(space.parseWriterNotice('w locks:{product:1}')).toBe('product:1');
      expect(space.parseWriterNotice('g tok.7 42 3 locks:{product:1}')).toBeUndefined();
      expect(space.parseWriterNotice('w other:{product:1}')).toBeUndefined();
    });
  });

  describe('parseGrant of an older release', () => {
    it('reads <spare>:<server ms> as no spare fences (the grant itself holds)', () => {
      expect(space.parseGrant('g tok.7 42 4:1763900000123 locks:{k}')).toEqual({
        key: 'k',
        token: 'tok.7',
        fence: 42,
        spare: 0,
      });
    });
  });

  describe('parseGrant', () => {
    it('decodes a grant', () => {
      expect(space.parseGrant('g tok.7 42 3 locks:{product:1}')).toEqual({
        key: 'product:1',
        token: 'tok.7',
        fence: 42,
        spare: 3,
      });
    });

    it('a spare that is not a number counts as 0', () => {
      expect(space.parseGrant('g t 5 x locks:{k}')).toEqual({
        key: 'k',
        token: 't',
        fence: 5,
        spare: 0,
      });
    });

    it('keeps spaces of the key (everything after the fourth word is the lock key)', () => {
      expect(space.parseGrant('g t 1 0 locks:{a key  with spaces}')).toEqual({
        key: 'a key  with spaces',
        token: 't',
        fence: 1,
        spare: 0,
      });
      const key = ' lead and trail ';
      expect(space.parseGrant(`g t 1 0 ${space.lockKey(key)}`)?.key).toBe(key);
    });

    it.each([
      ['a wrong first word', 'r t 1 0 locks:{k}'],
      ['a first word that only starts with g', 'gg t 1 0 locks:{k}'],
      ['too few parts', 'g t 1 locks:{k}'],
      ['no lock key', 'g t 1 0'],
      ['the release message', 'r'],
      ['an empty message', ''],
      ['a lock key of another prefix', 'g t 1 0 other:{k}'],
      ['a companion key', 'g t 1 0 locks:{k}:q'],
    ])('is undefined for %s', (_, message) => {
      expect(space.parseGrant(message)).toBeUndefined();
    });
  });

  describe('keySet', () => {
    it('the six script keys in the order the scripts take them, and the subsets', () => {
      const set = space.keySet('k');
      expect(set.all).toEqual([
        'locks:{k}',
        'locks:{k}:fence',
        'locks:{k}:wait',
        'locks:{k}:q',
        'locks:{k}:qm',
        'locks:{k}:h',
      ]);
      expect(set.all).toHaveLength(KEYS_PER_LOCK);
      expect(set.take).toEqual(['locks:{k}', 'locks:{k}:fence']);
    });

    it('every key of a set shares the hash tag (one Cluster slot)', () => {
      for (const k of space.keySet('product:9').all) expect(k).toContain('{product:9}');
    });

    it('is built once per key (the same object comes back)', () => {
      const s = new KeySpace('p:', false);
      const first = s.keySet('k');
      expect(s.keySet('k')).toBe(first);
      expect(s.keySet('other')).not.toBe(first);
    });

    it('bounds its cache: past 2,048 keys it starts over', () => {
      const s = new KeySpace('p:', false);
      const first = s.keySet('k0');
      for (let i = 1; i < 2048; i++) s.keySet(`k${i}`);
      // 2,048 remembered: still cached (1,024 callers on their own keys never miss).
      expect(s.keySet('k0')).toBe(first);
      // The 2,049th empties the cache: k0 is built anew (equal, not the same object).
      s.keySet('k2048');
      const again = s.keySet('k0');
      expect(again).not.toBe(first);
      expect(again).toEqual(first);
      expect(s.keySet('k2048')).toBe(s.keySet('k2048'));
    });
  });

  describe('allKeys and units', () => {
    it('allKeys: six per key, in the order given', () => {
      expect(space.allKeys(['a'])).toEqual(space.keySet('a').all);
      expect(space.allKeys(['b', 'a'])).toEqual([
        ...space.keySet('b').all,
        ...space.keySet('a').all,
      ]);
    });

    it('not on Cluster: one unit with every key', () => {
      expect(space.units(['a', 'b', 'c'])).toEqual([space.allKeys(['a', 'b', 'c'])]);
      expect(space.units(['a'])).toEqual([space.keySet('a').all]);
    });

    it('on Cluster: one unit per key, in order (a single key is one unit)', () => {
      const cluster = new KeySpace('locks:', true);
      expect(cluster.units(['a', 'b', 'c'])).toEqual([
        cluster.keySet('a').all,
        cluster.keySet('b').all,
        cluster.keySet('c').all,
      ]);
      expect(cluster.units(['a'])).toEqual([cluster.keySet('a').all]);
    });
  });
});
