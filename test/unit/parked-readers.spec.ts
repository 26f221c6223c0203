import { performance } from 'node:perf_hooks';
import { ParkedReaders, type ParkedTurn } from '../../lib/engine/parked-readers';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const never = Number.POSITIVE_INFINITY;

describe('ParkedReaders', () => {
  it('wakes the oldest reader of a key first, the others once it is done', async () => {
    const parked = new ParkedReaders<string>();
    const now = performance.now();
    const seen: string[] = [];
    const turns = ['a', 'b', 'c'].map((name, i) =>
      parked
        .park('k', now + i, now + 10_000, never, undefined, () => new Error('late'))
        .then((turn: ParkedTurn<string>) => {
          seen.push(`${name}:${turn.lead ? 'lead' : 'after'}`);
          return turn;
        }),
    );
    const other = parked.park('other', now, now + 10_000, never, undefined, () => 'late');
    expect(parked.oldest('k')).toBe(now);
    parked.wake('k');
    const lead = await turns[0];
    await sleep(5);
    expect(seen).toEqual(['a:lead']);
    expect(parked.oldest('k')).toBeUndefined();
    lead.done('share of a');
    lead.done('another'); // once only
    const after = await Promise.all(turns);
    expect(seen).toEqual(['a:lead', 'b:after', 'c:after']);
    expect(after.map((t) => t.shared)).toEqual([undefined, 'share of a', 'share of a']);
    expect(parked.size).toBe(1);
    parked.endAll((key) => new Error(`closing ${key}`));
    await expect(other).rejects.toThrow('closing other');
    expect(parked.size).toBe(0);
  });

  it('ends a reader at its deadline with the expiry error, and on its signal with the reason; the others stay', async () => {
    const parked = new ParkedReaders<string>();
    const now = performance.now();
    const abort = new AbortController();
    const late = parked.park('k', now, now + 30, never, undefined, () => new Error('expired'));
    const aborted = parked.park('k', now + 1, now + 10_000, never, abort.signal, () => 'x');
    const stays = parked.park('k', now + 2, now + 10_000, never, undefined, () => 'x');
    abort.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
    await expect(late).rejects.toThrow('expired');
    // Never before its deadline.
    expect(performance.now()).toBeGreaterThanOrEqual(now + 30);
    expect(parked.oldest('k')).toBe(now + 2);
    parked.wake('k');
    expect((await stays).lead).toBe(true);
    expect(parked.size).toBe(0);
  });

  it('gives a reader its turn alone at soloAt when that comes before its deadline', async () => {
    const parked = new ParkedReaders<string>();
    const now = performance.now();
    const waiting = parked.park('k', now, now + 10_000, now + 30, undefined, () => 'x');
    const turn = await waiting;
    expect(turn.lead).toBe(true);
    expect(performance.now()).toBeGreaterThanOrEqual(now + 30);
    expect(parked.size).toBe(0);
  });

  it('a reader whose signal is already aborted leaves at once', async () => {
    const parked = new ParkedReaders<string>();
    const now = performance.now();
    const abort = new AbortController();
    abort.abort(new Error('already'));
    await expect(
      parked.park('k', now, now + 10_000, never, abort.signal, () => 'x'),
    ).rejects.toThrow('already');
    expect(parked.size).toBe(0);
  });
});
