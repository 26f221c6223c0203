import { admission, keyNodeName, lockLine, nodePrefix } from '../../lib/zookeeper/lock-nodes';

/** The ZooKeeper line rules of lib/zookeeper/lock-nodes.ts, on hand-made lines. */

let seq = 0;
const line = (...kinds: string[]) =>
  lockLine(kinds.map((k) => `${k}-tok${seq}-${String(++seq).padStart(10, '0')}`));

describe('lockLine', () => {
  it('orders by sequence, not by name, and ignores foreign children', () => {
    const nodes = lockLine(['write-b-0000000002', 'read-a-0000000001', 'junk', 'x-0000000003']);
    expect(nodes.map((n) => n.sequence)).toEqual([1, 2]);
    expect(nodes.map((n) => n.kind)).toEqual(['read', 'write']);
  });
});

describe('admission', () => {
  it('exclusive: first in line only, watching the node just ahead', () => {
    const l = line('write', 'read', 'write');
    expect(admission(l, l[0].name)).toEqual({ admitted: true });
    expect(admission(l, l[2].name)).toEqual({ admitted: false, watch: [l[1]] });
  });

  it('read: in with readers ahead, behind the last writer ahead otherwise', () => {
    const l = line('read', 'read', 'write', 'read', 'write', 'read');
    expect(admission(l, l[1].name, 'read')).toEqual({ admitted: true });
    expect(admission(l, l[5].name, 'read')).toEqual({ admitted: false, watch: [l[4]] });
  });

  it('permits: the first N, each later one watching the N nodes just ahead', () => {
    const l = line('permits2', 'permits2', 'permits2', 'permits2');
    expect(admission(l, l[1].name, 2)).toEqual({ admitted: true });
    expect(admission(l, l[3].name, 2)).toEqual({ admitted: false, watch: [l[1], l[2]] });
  });

  it('a shared hold of another kind ahead is a mismatch', () => {
    const l = line('permits3', 'read');
    expect(admission(l, l[1].name, 'read')).toEqual({ admitted: false, mismatch: l[0] });
    const p = line('permits3', 'permits2');
    expect(admission(p, p[1].name, 2)).toEqual({ admitted: false, mismatch: p[0] });
    // An exclusive node ahead is no mismatch: the shared hold waits for it.
    const w = line('write', 'permits2');
    expect(admission(w, w[1].name, 2)).toEqual({ admitted: false, watch: [w[0]] });
  });
});

describe('names', () => {
  it('encode a key as one node name, injectively, with no "." or "/"', () => {
    expect(keyNodeName('a/b.c')).toBe('a%2Fb%2Ec');
    expect(keyNodeName('..')).toBe('%2E%2E');
    expect(keyNodeName('a:b')).not.toBe(keyNodeName('a%3Ab'));
    expect(nodePrefix(undefined, 't')).toBe('write-t-');
    expect(nodePrefix(5, 't')).toBe('permits5-t-');
  });
});
