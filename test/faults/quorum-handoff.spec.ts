import { type LockHandle, LockNotAcquiredError, LockService } from 'nest-locked';
import { FaultFrame, outcome, releaseIfHeld, settle, uid } from '../support/faults';
import { uniquePrefix, until, within } from '../support/lock-app';
import { itWith } from '../support/policies';
import { type RedisServerHandle, startRedisServers } from '../support/redis-server';

/**
 * A local handoff on a Redlock quorum while one node is frozen (issue 34): the holder hands the
 * key to the next caller of its process (HANDOFF, an answer from every node awaited), the frozen
 * node holds the round up to `commandTimeout`, and meanwhile the outgoing lease runs out, which
 * wakes the waiter. Whatever it then does, the lease it ends up with must be its alone: no other
 * process may take the key while it holds, and its hold is not lost.
 */
jest.setTimeout(30_000);

/** Long enough for the outgoing lease to run out while the HANDOFF round waits for the node. */
const COMMAND_TIMEOUT = 2_500;
/** The outgoing holder's lease: over well before the frozen node's answer times out. */
const SHORT_TTL = 600;
/** The waiter's lease: outlives the whole round, so only a release could free the key. */
const LONG_TTL = 20_000;

const frame = new FaultFrame();
afterAll(() => frame.stopAll());

describe.each([3, 5])('a quorum of %i with one node frozen during a local handoff', (n) => {
  let servers: RedisServerHandle[];
  let a: LockService;
  let b: LockService;

  beforeAll(async () => {
    servers = (await startRedisServers(n)).map((s) => frame.track(s));
    const options = {
      clients: servers.map((s) => s.url),
      keyPrefix: uniquePrefix(`handoff${n}`),
      commandTimeout: COMMAND_TIMEOUT,
      waitTimeout: 10_000,
    };
    a = (await frame.app(options)).get(LockService);
    b = (await frame.app(options)).get(LockService);
  });

  itWith('localHandoff')(
    'the waiter woken by the outgoing lease running out holds the key alone, and keeps it',
    async () => {
      const key = `handoff:${uid()}`;
      const holder = await a.acquire(key, { ttl: SHORT_TTL, watchdog: false });
      // The next caller of the same process: it waits in line for the holder's handoff.
      let waiterHolds = false;
      const waiter = a.acquire(key, { ttl: LONG_TTL, waitTimeout: 10_000 }).then((h) => {
        waiterHolds = true;
        return h;
      });
      await until(() => a.stats().queues > 0, 'the waiter queued');
      const frozenNode = servers[n - 1];
      frozenNode.kill('SIGSTOP');
      let handle: LockHandle | undefined;
      const other: string[] = [];
      try {
        // The HANDOFF round now waits for the frozen node (up to commandTimeout).
        const released = holder.release();
        handle = await within(waiter, 10_000, 'the waiter');
        // Another process asks while the waiter holds, until the handoff round is surely over.
        const roundOver = released.then(
          () => true,
          () => true,
        );
        let over = false;
        void roundOver.then(() => (over = true));
        while (!over) {
          const r = await settle(() => b.acquire(key, { waitTimeout: 0 }));
          await releaseIfHeld(r);
          other.push(outcome(r));
        }
        // Once more after the round: whatever it did is done by now.
        const last = await settle(() => b.acquire(key, { waitTimeout: 0 }));
        await releaseIfHeld(last);
        other.push(outcome(last));
      } finally {
        frozenNode.kill('SIGCONT');
      }
      expect({
        waiterHolds,
        othersTook: other.filter((o) => o !== LockNotAcquiredError.name),
        waiterLost: handle.signal.aborted,
        lockedOnMajority: await a.isLocked(key),
      }).toEqual({ waiterHolds: true, othersTook: [], waiterLost: false, lockedOnMajority: true });
      await handle.release();
    },
  );
});
