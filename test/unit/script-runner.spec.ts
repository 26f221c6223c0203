import type { RedisNode } from '../../lib/redis/protocol/redis-node';
import { ScriptRunner } from '../../lib/redis/protocol/script-runner';
import { RELEASE } from '../../lib/redis/protocol/scripts';
import { fakeNode, flush } from '../support/fake-redis-node';

/** RELEASE's answer as the fake node gives it (1: one key freed, its waiters woken). */
const freed = RELEASE.decode(1);

describe('ScriptRunner', () => {
  it('without the writeBatching policy, writes every command on its own (no corking)', async () => {
    const runner = new ScriptRunner(1_000);
    const { node, log } = fakeNode();
    const replies: unknown[] = [];
    for (const key of ['a', 'b', 'c', 'd']) {
      runner.send(node, RELEASE, [key, `${key}:wait`], ['t', '0', 1, 'clock'], (_e, r) =>
        replies.push(r),
      );
    }
    await flush();
    expect(log).toEqual(['RELEASE', 'RELEASE', 'RELEASE', 'RELEASE']);
    expect(replies).toEqual([freed, freed, freed, freed]);
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
