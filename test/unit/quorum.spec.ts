import { Quorum } from '../../lib/redis/protocol/quorum';

/** Lets every pending promise callback run. */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** `collect` as a promise, `conclude` the answers themselves unless given. */
function collected<N, T, R = (T | undefined)[]>(
  quorum: Quorum,
  nodes: readonly N[],
  ask: (node: N, answer: (v: T) => void, over: () => boolean) => void,
  yes: (v: T) => boolean | undefined,
  conclude: (answers: (T | undefined)[]) => R | Promise<R> = (a) => a as R,
  need?: number,
): Promise<R> {
  return new Promise((resolve, reject) =>
    quorum.collect(
      nodes,
      ask,
      yes,
      conclude,
      (error, result) => (error === undefined ? resolve(result as R) : reject(error)),
      need,
    ),
  );
}

/**
 * A `collect` over `n` nodes whose answers the test gives by hand, with what settled (and
 * when) observable.
 */
function collecting<T>(
  n: number,
  yes: (v: T) => boolean | undefined = (v) => v === (true as unknown as T),
) {
  const quorum = new Quorum(n);
  const nodes = Array.from({ length: n }, (_, i) => i);
  const answer: ((v: T) => void)[] = [];
  const conclude = jest.fn((answers: (T | undefined)[]) => [...answers]);
  let settled: { value?: (T | undefined)[]; error?: unknown } | undefined;
  const promise = collected<number, T, (T | undefined)[]>(
    quorum,
    nodes,
    (node, reply) => {
      answer[node] = reply;
    },
    yes,
    conclude,
  );
  promise.then(
    (value) => (settled = { value }),
    (error: unknown) => (settled = { error }),
  );
  return { answer, conclude, promise, settled: () => settled };
}

describe('Quorum', () => {
  it.each([
    [1, 1],
    [2, 2],
    [3, 2],
    [4, 3],
    [5, 3],
    [6, 4],
    [7, 4],
  ])('needs a majority: %i nodes -> %i votes', (nodes, size) => {
    const q = new Quorum(nodes);
    expect(q.nodes).toBe(nodes);
    expect(q.size).toBe(size);
  });

  it.each([1, 2, 3, 4, 5, 6, 7])('reached/impossible boundaries with %i nodes', (n) => {
    const q = new Quorum(n);
    expect(q.reached(q.size - 1)).toBe(false);
    expect(q.reached(q.size)).toBe(true);
    expect(q.reached(n)).toBe(true);
    // Against: as many as the nodes not needed for a majority still leave one possible.
    expect(q.impossible(n - q.size)).toBe(false);
    expect(q.impossible(n - q.size + 1)).toBe(true);
    expect(q.impossible(0)).toBe(false);
    expect(q.impossible(n)).toBe(true);
    // Both can never hold at once, and one of them always holds once every node voted.
    for (let ayes = 0; ayes <= n; ayes++) {
      const noes = n - ayes;
      expect(q.reached(ayes) !== q.impossible(noes)).toBe(true);
    }
  });

  describe('collect()', () => {
    it('asks every node at once, before any answer', () => {
      const asked: number[] = [];
      void collected(
        new Quorum(5),
        [10, 11, 12, 13, 14],
        (node) => asked.push(node),
        () => true,
      );
      expect(asked).toEqual([10, 11, 12, 13, 14]);
    });

    it('settles as soon as a majority says yes; answers still out are undefined', async () => {
      const c = collecting<boolean>(5);
      c.answer[4](true);
      c.answer[1](true);
      await flush();
      expect(c.settled()).toBeUndefined();
      c.answer[2](true);
      await flush();
      expect(c.settled()).toEqual({ value: [undefined, true, true, undefined, true] });
      expect(c.conclude).toHaveBeenCalledTimes(1);
    });

    it('settles as soon as a majority can no longer say yes', async () => {
      const c = collecting<boolean>(5);
      c.answer[0](true);
      c.answer[1](false);
      c.answer[3](false);
      await flush();
      expect(c.settled()).toBeUndefined();
      c.answer[4](false);
      await flush();
      expect(c.settled()).toEqual({ value: [true, false, undefined, false, false] });
    });

    it('with an even count a tie is not a majority: settles at the impossible answer', async () => {
      const c = collecting<boolean>(4);
      c.answer[0](true);
      c.answer[1](true);
      await flush();
      expect(c.settled()).toBeUndefined();
      c.answer[2](false);
      await flush();
      expect(c.settled()).toBeUndefined();
      c.answer[3](false);
      await flush();
      expect(c.settled()).toEqual({ value: [true, true, false, false] });
    });

    it('an abstaining node (yes undefined: a restarted node) counts neither way: the others are heard', async () => {
      const c = collecting<string>(5, (v) => (v === 'abstain' ? undefined : v === 'yes'));
      c.answer[0]('no');
      c.answer[1]('no');
      c.answer[2]('abstain');
      c.answer[3]('yes');
      await flush();
      // Counted as a no, the abstention would have ended the round here (3 against of 5).
      expect(c.settled()).toBeUndefined();
      c.answer[4]('yes');
      await flush();
      expect(c.settled()).toEqual({ value: ['no', 'no', 'abstain', 'yes', 'yes'] });
    });

    it('settles once every node answered', async () => {
      const c = collecting<boolean>(1);
      c.answer[0](false);
      await flush();
      expect(c.settled()).toEqual({ value: [false] });
      const two = collecting<boolean>(2);
      two.answer[1](true);
      await flush();
      expect(two.settled()).toBeUndefined();
      two.answer[0](true);
      await flush();
      expect(two.settled()).toEqual({ value: [true, true] });
    });

    it('drops answers that arrive after it settled', async () => {
      const c = collecting<boolean>(3);
      c.answer[0](true);
      c.answer[2](true);
      const value = await c.promise;
      c.answer[1](false);
      c.answer[0](false);
      await flush();
      expect(value).toEqual([true, undefined, true]);
      expect(c.conclude).toHaveBeenCalledTimes(1);
    });

    it('the default conclusion is the answers, later ones not written in', async () => {
      const answer: ((v: string) => void)[] = [];
      const p = collected<number, string>(
        new Quorum(3),
        [0, 1, 2],
        (i, reply) => (answer[i] = reply),
        (v) => v === 'ok',
      );
      answer[1]('ok');
      answer[0]('ok');
      const answers = await p;
      answer[2]('late');
      expect(answers).toEqual(['ok', 'ok', undefined]);
    });

    it('counts with the `yes` given (anything not yes is a vote against)', async () => {
      const c = collecting<number>(3, (v) => v > 0);
      c.answer[0](0);
      c.answer[1](-1);
      await flush();
      expect(c.settled()).toEqual({ value: [0, -1, undefined] });
    });

    it('rejects when conclude throws', async () => {
      const boom = new Error('boom');
      const answer: ((v: boolean) => void)[] = [];
      const p = collected<number, boolean, never>(
        new Quorum(3),
        [0, 1, 2],
        (i, reply) => (answer[i] = reply),
        (v) => v,
        () => {
          throw boom;
        },
      );
      answer[0](true);
      answer[1](true);
      await expect(p).rejects.toBe(boom);
    });

    it('follows a promise conclude returns', async () => {
      const answer: ((v: boolean) => void)[] = [];
      const p = collected<number, boolean, string>(
        new Quorum(1),
        [0],
        (i, reply) => (answer[i] = reply),
        (v) => v,
        async (a) => `done:${a.join()}`,
      );
      answer[0](true);
      await expect(p).resolves.toBe('done:true');
    });

    it('answers given synchronously while asking are counted', async () => {
      const asked: number[] = [];
      const answers = await collected<number, boolean>(
        new Quorum(3),
        [0, 1, 2],
        (i, reply) => {
          asked.push(i);
          reply(true);
        },
        (v) => v,
      );
      // Settled at the second yes; the third node is still asked, its answer dropped.
      expect(answers).toEqual([true, true, undefined]);
      expect(asked).toEqual([0, 1, 2]);
    });
  });

  it('needs every node when asked to (need = n)', async () => {
    const answer: ((v: boolean) => void)[] = [];
    const p = collected<number, boolean>(
      new Quorum(3),
      [0, 1, 2],
      (i, reply) => (answer[i] = reply),
      (v) => v,
      undefined,
      3,
    );
    let settled = false;
    void p.then(() => (settled = true));
    answer[0](true);
    answer[1](true);
    await flush();
    expect(settled).toBe(false);
    answer[2](false);
    await expect(p).resolves.toEqual([true, true, false]);
  });

  it('gives its conclusion once, outside the conclusion (a throwing `done` is not called again)', () => {
    const answer: ((v: boolean) => void)[] = [];
    const done = jest.fn(() => {
      throw new Error('done failed');
    });
    new Quorum(1).collect<number, boolean, (boolean | undefined)[]>(
      [0],
      (i, reply) => (answer[i] = reply),
      (v) => v,
      (a) => a,
      done,
    );
    expect(() => answer[0](true)).toThrow('done failed');
    expect(done).toHaveBeenCalledTimes(1);
    expect(done).toHaveBeenCalledWith(undefined, [true]);
  });

  it('failIfNoMajority throws only when the errors leave no majority possible', () => {
    const q = new Quorum(3);
    const e = new Error('down');
    expect(() => q.failIfNoMajority(['k'], [e, true, undefined], 'release')).not.toThrow();
    expect(() => q.failIfNoMajority(['k'], [e, true, e], 'release')).toThrow(/release/);
    expect(() => new Quorum(1).failIfNoMajority(['k'], [e], 'extend')).toThrow(/extend/);
  });
});
