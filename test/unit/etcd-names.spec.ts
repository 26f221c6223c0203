import { kindValue, linePrefix, prefixEnd, shareOf } from '../../lib/etcd/etcd-names';

describe('etcd names', () => {
  it('gives lock keys lines of which none contains another', () => {
    const keys = ['a', 'a/b', 'a/', 'ab', '1:a', 'é', ''];
    const lines = keys.map((k) => linePrefix('lock:', k));
    for (const [i, line] of lines.entries()) {
      for (const [j, other] of lines.entries()) {
        if (i !== j) expect(other.startsWith(line)).toBe(false);
      }
    }
  });

  it('ends a prefix range right after every key that starts with it', () => {
    expect(prefixEnd(Buffer.from('lock:1:a/')).toString()).toBe('lock:1:a0');
    expect([...prefixEnd(Buffer.from([0x61, 0xff, 0xff]))]).toEqual([0x62]);
    expect([...prefixEnd(Buffer.from([0xff]))]).toEqual([0]);
  });

  it('writes and reads back the kind of a hold', () => {
    for (const share of [undefined, 'read' as const, 5])
      expect(shareOf(kindValue(share))).toBe(share);
  });
});
