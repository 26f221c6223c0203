import { KeyLine, type LineListener } from '../../lib/redis/key-line';
import { KeyLines } from '../../lib/redis/key-lines';
import { RedisLease } from '../../lib/redis/redis-lease';
import { type ManualClock, manualPerformanceNow } from './support/clock';

const waiter = (token: string) => ({ token, wake: () => undefined });
const leaseUntil = (validUntil: number) =>
  new RedisLease(['k'], 'p.1', [1], 0, 1_000, false, validUntil, 0);

describe('KeyLines', () => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = manualPerformanceNow(5_000);
  });
  afterEach(() => jest.restoreAllMocks());

  it('of() creates a key line on first use, then gives the same one', () => {
    const lines = new KeyLines();
    expect(lines.get('k')).toBeUndefined();
    expect(lines.size).toBe(0);
    const line = lines.of('k');
    expect(line).toBeInstanceOf(KeyLine);
    expect(line.key).toBe('k');
    expect(lines.of('k')).toBe(line);
    expect(lines.get('k')).toBe(line);
    expect(lines.of('other')).not.toBe(line);
    expect(lines.size).toBe(2);
  });

  it('dropIfIdle drops an idle line, and stops its listening', () => {
    const lines = new KeyLines();
    const line = lines.of('k');
    const listener: LineListener = { ready: new Promise(() => undefined), stop: jest.fn() };
    void line.listen(() => listener);
    lines.dropIfIdle(line);
    expect(lines.get('k')).toBeUndefined();
    expect(lines.size).toBe(0);
    expect(listener.stop).toHaveBeenCalledTimes(1);
  });

  it.each([
    ['a waiter', (l: KeyLine) => l.join(waiter('w'), false)],
    ['a try in flight', (l: KeyLine) => l.startTry()],
    ['a valid hold', (l: KeyLine) => l.hold(leaseUntil(5_000 + 1_000))],
  ])('dropIfIdle keeps a line with %s (and its listening)', (_, busy) => {
    const lines = new KeyLines();
    const line = lines.of('k');
    const listener: LineListener = { ready: new Promise(() => undefined), stop: jest.fn() };
    void line.listen(() => listener);
    busy(line);
    lines.dropIfIdle(line);
    expect(lines.get('k')).toBe(line);
    expect(listener.stop).not.toHaveBeenCalled();
  });

  it('dropIfIdle drops a line whose only hold expired unreleased', () => {
    const lines = new KeyLines();
    const line = lines.of('k');
    line.hold(leaseUntil(clock.now() + 100));
    lines.dropIfIdle(line);
    expect(lines.get('k')).toBe(line);
    clock.advance(100);
    lines.dropIfIdle(line);
    expect(lines.get('k')).toBeUndefined();
  });

  it('dropIfIdle drops a line whose only hold ended (lost)', () => {
    const lines = new KeyLines();
    const line = lines.of('k');
    const l = leaseUntil(clock.now() + 10_000);
    line.hold(l);
    l.end();
    lines.dropIfIdle(line);
    expect(lines.size).toBe(0);
  });

  it('a line dropped before does not take its successor for the key with it', () => {
    const lines = new KeyLines();
    const old = lines.of('k');
    lines.dropIfIdle(old);
    const current = lines.of('k');
    expect(current).not.toBe(old);
    const listener: LineListener = { ready: new Promise(() => undefined), stop: jest.fn() };
    void current.listen(() => listener);
    // The old line, idle, is dropped again by a late caller: the current line stays.
    lines.dropIfIdle(old);
    expect(lines.get('k')).toBe(current);
    expect(listener.stop).not.toHaveBeenCalled();
  });

  it('lines of other keys are left alone', () => {
    const lines = new KeyLines();
    const a = lines.of('a');
    const b = lines.of('b');
    b.startTry();
    lines.dropIfIdle(a);
    lines.dropIfIdle(b);
    expect(lines.get('a')).toBeUndefined();
    expect(lines.get('b')).toBe(b);
    b.endTry();
    lines.dropIfIdle(b);
    expect(lines.size).toBe(0);
  });
});
