import { holdersInLine, liveView, viewRecord } from '../../lib/core/board-lines';

describe('board lines', () => {
  it('counts the holders at the head of a line by the recipes’ rules', () => {
    expect(holdersInLine([])).toBe(0);
    expect(holdersInLine(['exclusive', 'exclusive', 'read'])).toBe(1);
    // Readers hold up to the first writer; those behind it wait.
    expect(holdersInLine(['read', 'read', 'exclusive', 'read'])).toBe(2);
    // Permits of N: the first N of that N.
    expect(holdersInLine(['permits 2', 'permits 2', 'permits 2'])).toBe(2);
    expect(holdersInLine(['permits 3', 'exclusive', 'permits 3'])).toBe(1);
  });

  it('keeps a view with its expiry and drops it once expired', () => {
    const record = viewRecord('{"id":"a"}', 1_000);
    expect(liveView(record, 999)).toBe('{"id":"a"}');
    expect(liveView(record, 1_000)).toBeUndefined();
    expect(liveView('', 0)).toBeUndefined();
  });
});
