import { ScriptRunner } from '../../lib/redis/protocol/script-runner';
import { CORK_BATCH, WriteBatching } from '../../lib/redis/protocol/write-batching';
import { RELEASE, TRY } from '../../lib/redis/protocol/scripts';
import { fakeNode, flush } from '../support/fake-redis-node';

/** RELEASE's answer as the fake node gives it (1: one key freed, its waiters woken). */
const freed = RELEASE.decode(1);

describe('WriteBatching (the writeBatching policy) in the ScriptRunner', () => {
  let runner: ScriptRunner;
  beforeEach(() => (runner = new ScriptRunner(1_000, undefined, new WriteBatching())));
  afterEach(() => runner.close());

  it('writes a lone command at once, with no corking', async () => {
    const { node, log } = fakeNode();
    const replies: unknown[] = [];
    runner.send(node, RELEASE, ['a', 'a:wait'], ['t.1', '0', 1, 'clock'], (_e, r) =>
      replies.push(r),
    );
    await flush();
    runner.send(node, RELEASE, ['a', 'a:wait'], ['t.2', '0', 1, 'clock'], (_e, r) =>
      replies.push(r),
    );
    await flush();
    expect(log).toEqual(['RELEASE', 'RELEASE']);
    expect(replies).toEqual([freed, freed]);
  });

  it('while calls are in flight, corks a node from the second command of a tick to its end', async () => {
    const { node, log } = fakeNode();
    const replies: unknown[] = [];
    const send = (key: string) =>
      runner.send(node, RELEASE, [key, `${key}:wait`], ['t', '0', 1, 'clock'], (_e, r) =>
        replies.push(r),
      );
    send('a'); // nothing in flight: written at once, the tick not tracked
    send('b'); // in flight: the first write of the tick that counts, at once
    send('c'); // the second: corked, with every later one of the tick
    send('d');
    expect(log).toEqual(['RELEASE', 'RELEASE', 'cork', 'RELEASE', 'RELEASE']);
    await flush();
    expect(log).toEqual(['RELEASE', 'RELEASE', 'cork', 'RELEASE', 'RELEASE', 'uncork']);
    expect(replies).toEqual([freed, freed, freed, freed]);
  });

  it('sends the writes of a corked socket in batches while the tick goes on, each twice the last', async () => {
    const { node, log } = fakeNode();
    const send = (key: string) =>
      runner.send(node, RELEASE, [key, `${key}:wait`], ['t', '0', 1, 'clock'], () => undefined);
    send('a'); // nothing in flight: written at once
    send('b'); // the first write of the tick that counts: at once
    for (let i = 0; i < 3 * CORK_BATCH + 4; i++) send(`k${i}`);
    const writes = (n: number) => Array.from({ length: n }, () => 'RELEASE');
    // A full batch leaves before the next write, which starts the next batch.
    expect(log).toEqual([
      ...writes(2),
      'cork',
      ...writes(CORK_BATCH),
      'uncork',
      'cork',
      ...writes(2 * CORK_BATCH),
      'uncork',
      'cork',
      ...writes(4),
    ]);
    await flush();
    expect(log.at(-1)).toBe('uncork');
  });

  it('corks each busy node of a tick once and uncorks them all', async () => {
    const nodes = [fakeNode('ready', [1, 7]), fakeNode('ready', [1, 7]), fakeNode('ready', [1, 7])];
    const other = fakeNode('ready', [1, 7]);
    runner.send(other.node, TRY, ['x', 'x:fence'], ['t', 10, 1, 'clock'], () => {}); // in flight meanwhile
    for (const key of ['a', 'b', 'c']) {
      for (const { node } of nodes)
        runner.send(node, TRY, [key, `${key}:fence`], ['t', 10, 1, 'clock'], () => {});
    }
    for (const { log } of nodes) expect(log).toEqual(['TRY', 'cork', 'TRY', 'TRY']);
    await flush();
    for (const { log } of nodes) expect(log).toEqual(['TRY', 'cork', 'TRY', 'TRY', 'uncork']);
  });

  it('leaves a connection that is not ready alone (ioredis queues its commands)', async () => {
    const { node, log } = fakeNode('connecting');
    for (const key of ['a', 'b', 'c']) {
      runner.send(node, RELEASE, [key, `${key}:wait`], ['t', '0', 1, 'clock'], () => undefined);
    }
    await flush();
    expect(log).toEqual(['RELEASE', 'RELEASE', 'RELEASE']);
  });
});
