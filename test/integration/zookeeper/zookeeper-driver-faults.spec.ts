import { createClient } from 'node-zookeeper-client';
import { LockBackendError, LockLostError, LockService } from 'nest-locked';
import { zookeeperBackend } from 'nest-locked/zookeeper';
import { createLockApp, uniquePrefix, until, within } from '../../support/lock-app';
import type { ZooKeeperProxy } from '../../support/zookeeper-proxy';
import { zookeeperSuite } from '../../support/zookeeper-suite';

/**
 * Faults of the driver (node-zookeeper-client) that must never end the process: a reply it
 * cannot decode (it threw `Unknown code: ...` from its socket's data handler, an uncaught
 * exception), and a session ended on the server under the client. Each becomes a
 * LockBackendError or a lost hold, and the backend connects again and locks.
 */

jest.setTimeout(30_000);

/** Long enough that the backend's liveness probe (a third of it) stays out of the way. */
const SESSION_MS = 10_000;
/** A code ZooKeeper never sends: the one the driver choked on in the field. */
const UNKNOWN_CODE = 1_913_258_009;

const suite = zookeeperSuite();

/** A lock service of its own session, connected to the member through a proxy of the test. */
async function throughProxy(name: string): Promise<{ locks: LockService; proxy: ZooKeeperProxy }> {
  const proxy = await suite.proxy();
  const backend = zookeeperBackend({
    connectString: proxy.address,
    root: `/${uniquePrefix(name).replace(/:/g, '-').replace(/-$/, '')}`,
    sessionTimeout: SESSION_MS,
  });
  const nest = await createLockApp({
    options: { backend, keyPrefix: '', waitTimeout: 5_000, commandTimeout: 1_000 },
  });
  suite.apps.push(nest);
  return { locks: nest.get(LockService), proxy };
}

describe('zookeeper: a driver fault is a LockBackendError and a reconnect, never a crash', () => {
  it('a reply the driver cannot decode fails the call, and the client connects again', async () => {
    const { locks, proxy } = await throughProxy('bad-reply');
    await (await locks.acquire('k')).release();
    const before = proxy.connections;
    const corrupted = proxy.corruptNextReply(UNKNOWN_CODE);
    // A try: a waiter with time left would ride through the failure and get the key.
    const failed = locks.acquire('k', { waitTimeout: 0 }).then(
      (held) => held.release(),
      (error: unknown) => error,
    );
    await within(corrupted, 5_000, 'the corrupted reply');
    const error = await within(failed, 5_000, 'the call whose reply was corrupted');
    expect(error).toBeInstanceOf(LockBackendError);
    expect(String((error as LockBackendError).message)).toMatch(/Unknown code: 1913258009/);
    // The connection with the corrupted stream was dropped and made again, same session.
    await until(() => proxy.connections > before, 'a new connection');
    await (await locks.acquire('k', { waitTimeout: 5_000 })).release();
  });

  it('a connection broken in the middle of a reply: the next one is read from its start', async () => {
    const { locks, proxy } = await throughProxy('half-reply');
    const held = await locks.acquire('a');
    const before = proxy.connections;
    const broken = proxy.breakNextReply();
    const check = locks.isLocked('a').then(
      (locked) => locked,
      (error: unknown) => error,
    );
    await within(broken, 5_000, 'the broken reply');
    const answer = await within(check, 5_000, 'the call whose reply broke');
    // A read runs once more on the next connection; if that too fails, a LockBackendError.
    if (answer !== true) expect(answer).toBeInstanceOf(LockBackendError);
    await until(() => proxy.connections > before, 'a new connection');
    // Same session: the hold is still there, and the client locks again.
    expect(held.signal.aborted).toBe(false);
    expect(await locks.isLocked('a')).toBe(true);
    await held.release();
    await (await locks.acquire('a', { waitTimeout: 5_000 })).release();
  });

  it('a session ended on the server ends its holds, and a new session locks again', async () => {
    const { locks, proxy } = await throughProxy('session-ended');
    const held = await locks.acquire('k');
    // Cut off from the member (the proxy refuses it), so it cannot take its session back,
    // while another client resumes the session with its id and password and closes it.
    proxy.cut();
    const { id, password } = proxy.session!;
    // The driver takes a session to resume (its options are typed without it).
    const resume = { sessionId: id, sessionPassword: password, sessionTimeout: SESSION_MS };
    const thief = createClient(
      suite.zk.connectString,
      resume as Parameters<typeof createClient>[1],
    );
    await new Promise<void>((resolve) => {
      thief.once('connected', () => resolve());
      thief.connect();
    });
    await new Promise<void>((resolve) => {
      thief.once('disconnected', () => resolve());
      thief.close();
    });
    proxy.restore();
    await until(() => held.signal.aborted, 'the hold ends with its session', 10_000);
    expect(held.signal.reason).toBeInstanceOf(LockLostError);
    await (await locks.acquire('k', { waitTimeout: 5_000 })).release();
  });
});
