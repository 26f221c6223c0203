import { EntryOrder } from '../../lib/etcd/etcd-entry-order';

/** A fake entry: the create revision etcd would have given it. */
interface Placed {
  readonly revision: number;
  readonly by: string;
}

/** An `enter` whose answer the test gives, in any order it likes. */
function answerable() {
  let answer!: (placed: Placed) => void;
  let fail!: (error: Error) => void;
  let sent = false;
  const enter = () => {
    sent = true;
    return new Promise<Placed>((resolve, reject) => ((answer = resolve), (fail = reject)));
  };
  return { enter, answer: (p: Placed) => answer(p), fail: (e: Error) => fail(e), sent: () => sent };
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('EntryOrder (the entries of one process into a line)', () => {
  const order = () => new EntryOrder<Placed>((placed) => BigInt(placed.revision));

  it('entries alike asked together go at once, and their places go out in the order asked', async () => {
    const entries = order();
    const [a, b, c] = [answerable(), answerable(), answerable()];
    const placed = [a, b, c].map((x) => entries.inTurn(['k'], 'x', x.enter));
    await flush();
    expect([a.sent(), b.sent(), c.sent()]).toEqual([true, true, true]);
    // etcd applied them in the order c, a, b.
    b.answer({ revision: 30, by: 'b' });
    c.answer({ revision: 10, by: 'c' });
    a.answer({ revision: 20, by: 'a' });
    expect((await Promise.all(placed)).map((p) => p.revision)).toEqual([10, 20, 30]);
  });

  it('an entry of another kind waits until the turn before it is answered', async () => {
    const entries = order();
    const [a, b] = [answerable(), answerable()];
    const first = entries.inTurn(['k'], 'x', a.enter);
    const second = entries.inTurn(['k'], undefined, b.enter);
    await flush();
    expect(b.sent()).toBe(false);
    a.answer({ revision: 1, by: 'a' });
    await first;
    await flush();
    expect(b.sent()).toBe(true);
    b.answer({ revision: 2, by: 'b' });
    expect((await second).by).toBe('b');
  });

  it('an entry asked after a first answer came waits for the turn to be over', async () => {
    const entries = order();
    const [a, b, c] = [answerable(), answerable(), answerable()];
    const first = entries.inTurn(['k'], 'x', a.enter);
    const second = entries.inTurn(['k'], 'x', b.enter);
    await flush();
    a.answer({ revision: 1, by: 'a' });
    await flush();
    const third = entries.inTurn(['k'], 'x', c.enter);
    await flush();
    expect(c.sent()).toBe(false);
    b.answer({ revision: 2, by: 'b' });
    await Promise.all([first, second]);
    await flush();
    expect(c.sent()).toBe(true);
    c.answer({ revision: 3, by: 'c' });
    expect((await third).revision).toBe(3);
  });

  it('an entry that fails gets its error; the others of its turn their places', async () => {
    const entries = order();
    const [a, b, c] = [answerable(), answerable(), answerable()];
    const placed = [a, b, c].map((x) =>
      entries.inTurn(['k'], 'x', x.enter).then(
        (p) => p.revision,
        (e: Error) => e.message,
      ),
    );
    await flush();
    c.answer({ revision: 5, by: 'c' });
    b.fail(new Error('lost'));
    a.answer({ revision: 7, by: 'a' });
    expect(await Promise.all(placed)).toEqual([5, 'lost', 7]);
  });
});
