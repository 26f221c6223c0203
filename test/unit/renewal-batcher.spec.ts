import { RENEW_MANY } from '../../lib/redis/protocol/scripts';
import type { RedisNode } from '../../lib/redis/protocol/redis-node';
import { RenewalBatcher } from '../../lib/redis/protocol/renewal-batcher';
import type { ScriptCallback, ScriptRunner } from '../../lib/redis/protocol/script-runner';
import type { ExtendReply } from '../../lib/redis/protocol/scripts';
import { fakeTimersWithPerformance } from './support/clock';

/** The calls a batcher makes, answered by hand (the script itself runs in the integration tests). */
function recordingRunner() {
  const calls: {
    keys: readonly string[];
    args: readonly (string | number)[];
    cb: ScriptCallback<ExtendReply[]>;
  }[] = [];
  const runner = {
    send: (
      _node: RedisNode,
      script: unknown,
      keys: readonly string[],
      args: readonly (string | number)[],
      cb: ScriptCallback<ExtendReply[]>,
    ) => {
      expect(script).toBe(RENEW_MANY);
      calls.push({ keys, args, cb });
    },
  } as unknown as ScriptRunner;
  return { runner, calls };
}

const node = {} as RedisNode;

describe('RenewalBatcher', () => {
  beforeEach(() => fakeTimersWithPerformance());
  afterEach(() => jest.useRealTimers());

  it('sends the renewals of one window as one call, and each hold gets its own answer', async () => {
    const { runner, calls } = recordingRunner();
    const b = new RenewalBatcher(runner, '0');
    const answers: (ExtendReply | Error)[] = [];
    for (let i = 0; i < 3; i++) b.add(node, [`k${i}`], `t${i}`, 30_000, (r) => answers.push(r));
    expect(calls).toHaveLength(0);
    await jest.advanceTimersByTimeAsync(20);
    expect(calls).toHaveLength(1);
    expect(calls[0].keys).toEqual(['k0', 'k1', 'k2']);
    expect(calls[0].args).toEqual(['0', 't0', 30_000, 1, 't1', 30_000, 1, 't2', 30_000, 1]);
    calls[0].cb(undefined, ['renewed', 'lost', 'repaired']);
    expect(answers).toEqual(['renewed', 'lost', 'repaired']);
  });

  it('waits at most 1% of a short lease', async () => {
    const { runner, calls } = recordingRunner();
    const b = new RenewalBatcher(runner, '1');
    b.add(node, ['a'], 't', 30_000, () => undefined);
    await jest.advanceTimersByTimeAsync(2);
    b.add(node, ['b'], 'u', 300, () => undefined); // due in 3 ms: the window moves up
    await jest.advanceTimersByTimeAsync(3);
    expect(calls).toHaveLength(1);
    expect(calls[0].keys).toEqual(['a', 'b']);
  });

  it('splits at 500 holds and at 2,000 keys per call', async () => {
    const { runner, calls } = recordingRunner();
    const b = new RenewalBatcher(runner, '0');
    for (let i = 0; i < 1_200; i++) b.add(node, [`k${i}`], `t${i}`, 30_000, () => undefined);
    await jest.advanceTimersByTimeAsync(20);
    expect(calls.map((c) => c.keys.length)).toEqual([500, 500, 200]);
    calls.length = 0;
    const many = Array.from({ length: 300 }, (_, i) => `m${i}`);
    for (let i = 0; i < 10; i++) b.add(node, many, `t${i}`, 30_000, () => undefined);
    await jest.advanceTimersByTimeAsync(20);
    expect(calls.map((c) => c.keys.length)).toEqual([2_100, 900]);
  });

  it('hands a large batch its answers a few dozen per turn of the event loop', async () => {
    const { runner, calls } = recordingRunner();
    const b = new RenewalBatcher(runner, '0');
    const answers: (ExtendReply | Error)[] = [];
    for (let i = 0; i < 120; i++) b.add(node, [`k${i}`], `t${i}`, 30_000, (r) => answers.push(r));
    await jest.advanceTimersByTimeAsync(20);
    const failure = new Error('no answer from Redis within 1000 ms (commandTimeout)');
    calls[0].cb(failure);
    expect(answers).toHaveLength(50);
    await jest.advanceTimersByTimeAsync(1);
    expect(answers).toHaveLength(120);
    expect(answers.every((a) => a === failure)).toBe(true);
  });
});
