import type { RedisNode } from '../../lib/redis/redis-node';
import { ScriptRunner } from '../../lib/redis/script-runner';
import { RELEASE, TRY } from '../../lib/redis/scripts';

/**
 * A ready node that records its EVALSHA calls (answered with 1) and any corking of its socket;
 * the writes of ioredis are not simulated.
 */
function fakeNode() {
  const log: string[] = [];
  const stream = {
    cork: () => log.push('cork'),
    uncork: () => log.push('uncork'),
  };
  const node = {
    status: 'ready',
    stream,
    evalsha: (...args: unknown[]) => {
      const sha = args.flat()[0] as string;
      log.push(sha === TRY.sha ? 'TRY' : sha === RELEASE.sha ? 'RELEASE' : sha);
      return Promise.resolve(1);
    },
  } as unknown as RedisNode;
  return { node, log };
}

/** RELEASE's answer for one key freed with nobody waiting, as the fake node replies (1). */
const freed = RELEASE.decode(1);

describe('ScriptRunner', () => {
  it('writes every command at once, in order, with no corking and nothing deferred', () => {
    const runner = new ScriptRunner(1_000);
    const { node, log } = fakeNode();
    for (const key of ['a', 'b', 'c', 'd']) {
      runner.send(node, RELEASE, [key, `${key}:wait`], ['t', '0', 1, 'clock'], () => undefined);
    }
    // Sent from within the calls (no tick waited for), the socket never corked.
    expect(log).toEqual(['RELEASE', 'RELEASE', 'RELEASE', 'RELEASE']);
    runner.close();
  });

  it('answers each call with its decoded reply', async () => {
    const runner = new ScriptRunner(1_000);
    const { node } = fakeNode();
    const replies = await Promise.all(
      ['a', 'b'].map((key) =>
        runner.run(node, RELEASE, [key, `${key}:wait`], ['t', '0', 1, 'clock']),
      ),
    );
    expect(replies).toEqual([freed, freed]);
    runner.close();
  });

  it('answers once: a reply after the commandTimeout is dropped', async () => {
    jest.useFakeTimers();
    try {
      const runner = new ScriptRunner(100);
      let answer: (v: unknown) => void = () => undefined;
      const node = {
        status: 'ready',
        evalsha: () => new Promise((resolve) => (answer = resolve)),
      } as unknown as RedisNode;
      const cb = jest.fn();
      runner.send(node, RELEASE, ['a', 'a:wait'], ['t.1', '0', 1, 'clock'], cb);
      jest.advanceTimersByTime(250);
      expect(cb).toHaveBeenCalledTimes(1);
      expect(cb.mock.calls[0][0]).toBeInstanceOf(Error);
      answer(1);
      await Promise.resolve();
      await Promise.resolve();
      expect(cb).toHaveBeenCalledTimes(1);
      runner.close();
    } finally {
      jest.useRealTimers();
    }
  });
});
