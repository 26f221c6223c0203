import { type LockHandle, LockNotAcquiredError, LockService } from 'nest-locked';
import { FaultFrame, outcome, releaseIfHeld, settle, uid } from '../support/faults';
import { sleep, uniquePrefix, until, within } from '../support/lock-app';
import { ACQUIRE, TRY } from '../../lib/redis/protocol/scripts';
import { itWith } from '../support/policies';
import {
  type RedisServerHandle,
  startRedisServer,
  startRedisServers,
} from '../support/redis-server';

/**
 * A local handoff while a node is frozen (issue 34): the holder passes the key to the next
 * caller of its process in a round of its own (HANDOFF on a quorum, which awaits every node;
 * RELEASE_TO on a single node), the frozen node holds that round up to `commandTimeout`, and
 * meanwhile the outgoing lease runs out, which wakes the waiter. Whatever the waiter then does,
 * the lease it ends up with must be its alone: no other process may take the key while it
 * holds, and its hold is not lost.
 */
jest.setTimeout(30_000);

/** The waiter's lease: outlives the whole scenario, so only a release could free the key. */
const LONG_TTL = 20_000;

const frame = new FaultFrame();
afterAll(() => frame.stopAll());

/**
 * `a`'s holder (`ttl`) releases with its next caller waiting, while `freeze` keeps a node from
 * answering (it resolves once the node is resumed); `b`, another process, asks for the key while
 * the waiter holds it, until the release is over and once more after. The waiter's hold and what
 * `b` got.
 */
async function handOffWhileFrozen(
  a: LockService,
  b: LockService,
  ttl: number,
  freeze: (during: () => Promise<void>) => Promise<void>,
) {
  const key = `handoff:${uid()}`;
  const holder = await a.acquire(key, { ttl, watchdog: false });
  // The next caller of the same process: it waits in line for the holder's pass.
  const waiter = a.acquire(key, { ttl: LONG_TTL, waitTimeout: 10_000 });
  await until(() => a.stats().queues > 0, 'the waiter queued');
  const othersGot: string[] = [];
  let handle: LockHandle | undefined;
  await freeze(async () => {
    // The pass now waits for the frozen node (up to commandTimeout).
    const released = holder.release().then(
      () => true,
      () => true,
    );
    handle = await within(waiter, 10_000, 'the waiter');
    let over = false;
    void released.then(() => (over = true));
    while (!over) {
      const r = await settle(() => b.acquire(key, { waitTimeout: 0 }));
      await releaseIfHeld(r);
      othersGot.push(outcome(r));
    }
  });
  // Once more, with every node answering: whatever the release did is done by now.
  const last = await settle(() => b.acquire(key, { waitTimeout: 0 }));
  await releaseIfHeld(last);
  othersGot.push(outcome(last));
  const result = {
    othersTook: othersGot.filter((o) => o !== LockNotAcquiredError.name),
    waiterLost: handle!.signal.aborted,
    lockedNow: await a.isLocked(key),
  };
  await handle!.release();
  return result;
}

describe.each([3, 5])('a quorum of %i with one node frozen during a local handoff', (n) => {
  /** Long enough for the outgoing lease to run out while HANDOFF waits for the frozen node. */
  const COMMAND_TIMEOUT = 2_500;
  /** The outgoing holder's lease: over well before the frozen node's answer times out. */
  const SHORT_TTL = 600;
  let servers: RedisServerHandle[];
  let a: LockService;
  let b: LockService;

  beforeAll(async () => {
    servers = (await startRedisServers(n)).map((s) => frame.track(s));
    const options = {
      clients: servers.map((s) => s.url),
      keyPrefix: uniquePrefix(`handoff${n}`),
      commandTimeout: COMMAND_TIMEOUT,
    };
    a = (await frame.app(options)).get(LockService);
    b = (await frame.app(options)).get(LockService);
  });

  itWith('localHandoff')(
    'the waiter woken by the outgoing lease running out holds the key alone, and keeps it',
    async () => {
      const frozenNode = servers[n - 1];
      const result = await handOffWhileFrozen(a, b, SHORT_TTL, async (during) => {
        frozenNode.kill('SIGSTOP');
        try {
          await during();
        } finally {
          frozenNode.kill('SIGCONT');
        }
      });
      expect(result).toEqual({ othersTook: [], waiterLost: false, lockedNow: true });
    },
  );
});

describe('a single node frozen during a release to the next caller (RELEASE_TO)', () => {
  const COMMAND_TIMEOUT = 2_000;
  /** Runs out before RELEASE_TO times out: the waiter wakes while it is on its way. */
  const SHORT_TTL = 1_500;
  /**
   * The node resumes after RELEASE_TO timed out (its undo is sent then) and before an attempt
   * the waiter would have sent when the lease ran out times out: every command waits on the
   * node's connection and runs in the order sent.
   */
  const FROZEN_MS = COMMAND_TIMEOUT + 700;
  let server: RedisServerHandle;
  let a: LockService;
  let b: LockService;

  /** Freezes the node, resuming it `FROZEN_MS` later. */
  const freezeFor = async (during: () => Promise<void>): Promise<void> => {
    server.kill('SIGSTOP');
    const resumed = sleep(FROZEN_MS).then(() => server.kill('SIGCONT'));
    try {
      await during();
    } finally {
      await resumed;
    }
  };

  beforeAll(async () => {
    server = frame.track(await startRedisServer());
    // localHandoffs 0: a release with a caller of this process waiting goes by RELEASE_TO.
    const options = {
      clients: [server.url],
      keyPrefix: uniquePrefix('release-to'),
      commandTimeout: COMMAND_TIMEOUT,
      localHandoffs: 0,
    };
    a = (await frame.app(options)).get(LockService);
    b = (await frame.app(options)).get(LockService);
  });

  itWith('localHandoff')(
    'the waiter woken by the outgoing lease running out holds the key alone, and keeps it',
    async () => {
      // Once with the node up: the scripts are loaded and `a` listens for its grants; and a
      // waiter's attempt (ACQUIRE) once, which the pass does not load.
      const warm = await handOffWhileFrozen(a, b, SHORT_TTL, (during) => during());
      expect(warm).toEqual({ othersTook: [], waiterLost: false, lockedNow: true });
      const busy = `busy:${uid()}`;
      await a.acquire(busy, { ttl: 200, watchdog: false });
      await (await b.acquire(busy, { waitTimeout: 5_000 })).release();
      const result = await handOffWhileFrozen(a, b, SHORT_TTL, freezeFor);
      expect(result).toEqual({ othersTook: [], waiterLost: false, lockedNow: true });
    },
  );

  itWith('localHandoff')(
    'the same with the node short of scripts (restarted, SCRIPT FLUSH): an undo sent as EVALSHA and sent again as EVAL does not land after the waiter took the key',
    async () => {
      // As a restarted node that has run only first tries and attempts since: the pass's undo
      // (RELEASE) answers NOSCRIPT, the waiter's ACQUIRE behind it on the connection does not.
      const raw = frame.raw(server);
      await raw.script('FLUSH');
      for (const script of [TRY, ACQUIRE]) await raw.script('LOAD', script.lua);
      const result = await handOffWhileFrozen(a, b, SHORT_TTL, freezeFor);
      expect(result).toEqual({ othersTook: [], waiterLost: false, lockedNow: true });
    },
  );
});
