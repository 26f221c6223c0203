import { KeyCounts } from '../../lib/core/key-counts';

describe('KeyCounts', () => {
  it('lists a key while its count is above 0, and only then', () => {
    const counts = new KeyCounts();
    counts.add('a');
    counts.add('a');
    counts.add('b');
    expect([...counts.keys()]).toEqual(['a', 'b']);
    counts.remove('a');
    expect(counts.has('a')).toBe(true);
    counts.remove('a');
    counts.remove('b');
    expect(counts.has('a')).toBe(false);
    // Never below 0: a stray remove leaves nothing behind.
    counts.remove('c');
    expect([...counts.keys()]).toEqual([]);
  });
});
