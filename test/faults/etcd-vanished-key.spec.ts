import { Logger } from '@nestjs/common';
import { Etcd3, type IKeyValue } from 'etcd3';
import { etcdBackend } from 'nest-locked/etcd';
import type { Lease, LockBackend, Share } from '../../lib/core/lock-backend';
import { lineKeys, startEtcdCluster, type EtcdCluster } from '../support/etcd-server';
import { uniquePrefix } from '../support/lock-app';

/**
 * A waiter whose own key vanishes while it waits (its session lease revoked on the server, as
 * `/v3/lease/revoke` or an operator does): it is no longer in the line, so when the keys before
 * it go it must not be told it holds the lock (another caller may have it by then, with a larger
 * fence); it enters again, under a new session, while it has time left. Go's
 * `concurrency.Mutex.Lock` checks its own key after `waitDeletes` for the same reason.
 *
 * The session lease is a minute long, so this process's keep-alive (every 20 s) cannot learn of
 * the revoke during a test: only the key's absence can tell the waiter.
 */

jest.setTimeout(60_000);

const SESSION_TTL = 60_000;

describe('etcd: a waiter whose key vanished is not granted', () => {
  let etcd: EtcdCluster;
  let admin: Etcd3;
  const backends: LockBackend[] = [];

  beforeAll(async () => {
    Logger.overrideLogger(false);
    etcd = await startEtcdCluster(1);
    admin = new Etcd3({ hosts: etcd.hosts });
  });
  afterAll(async () => {
    await Promise.all(backends.map((b) => b.close()));
    admin?.close();
    await etcd?.stop();
  });

  function backend(prefix: string): LockBackend {
    const b = etcdBackend({ hosts: etcd.hosts, sessionTtl: SESSION_TTL }).create({
      group: 'default',
      keyPrefix: prefix,
      driftFactor: 0.01,
      commandTimeout: 1_000,
      logger: new Logger('etcd-vanished-key'),
    });
    backends.push(b);
    return b;
  }

  /** The line's keys once `ready` holds for them (polled: etcd tells no one of a wait's entry). */
  async function lineWhen(
    prefix: string,
    ready: (kvs: IKeyValue[]) => boolean,
    what: string,
  ): Promise<IKeyValue[]> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const kvs = await lineKeys(admin, prefix);
      if (ready(kvs)) return kvs;
      if (Date.now() > deadline) throw new Error(`${what}: not within 20 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /**
   * A holds `k`; W waits behind it (in A's process when `sameProcess`: the handover path; else
   * in its own: the watch path); W's session lease is revoked; C then gets in line (or the lock)
   * under a session of its own; A releases. W must not be granted while C holds: it enters again
   * under a new session, and gets the lock after C, with a larger fence.
   */
  async function vanished(
    name: string,
    sameProcess: boolean,
    /** The kinds of A's, W's and C's holds (all exclusive unless given). */
    [aShare, wShare, cShare]: (Share | undefined)[] = [],
  ) {
    const prefix = uniquePrefix(name);
    const a = backend(prefix);
    const w = sameProcess ? a : backend(prefix);
    const c = backend(prefix);
    const held = await a.acquire(['k'], { ttl: 60_000, waitTimeout: 0, share: aShare });
    let granted: Lease | undefined;
    let failed: unknown;
    const waiting = w.acquire(['k'], { ttl: 60_000, waitTimeout: 30_000, share: wShare });
    waiting.then(
      (lease) => (granted = lease),
      (error: unknown) => (failed = error),
    );
    const [first, waiter] = await lineWhen(prefix, (kvs) => kvs.length === 2, 'W in line');
    await admin.leaseClient.leaseRevoke({ ID: waiter.lease });
    const taking = c.acquire(['k'], { ttl: 60_000, waitTimeout: 30_000, share: cShare });
    const others = (kv: IKeyValue) => kv.lease !== first.lease && kv.lease !== waiter.lease;
    // C in line (behind A, or holding at once when the revoke took A's key too).
    const [cKey] = (await lineWhen(prefix, (kvs) => kvs.some(others), 'C in line')).filter(others);
    await a.release(held).catch(() => undefined);
    const taken = await taking;
    // W either enters again (a key of a third session) or, the defect, is granted or fails.
    await lineWhen(
      prefix,
      (kvs) =>
        granted !== undefined ||
        failed !== undefined ||
        kvs.some((kv) => others(kv) && kv.lease !== cKey.lease),
      'W entered again, granted or failed',
    );
    expect({ granted: granted?.fences, failed }).toEqual({ granted: undefined, failed: undefined });
    await c.release(taken);
    const lease = await waiting;
    expect(lease.fences[0]).toBeGreaterThan(taken.fences[0]);
    await w.release(lease);
  }

  it('behind a holder of another process (the watch path)', async () => {
    await vanished('etcd-vanished-watch', false);
  });

  it('behind a holder of its own process (the handover path)', async () => {
    await vanished('etcd-vanished-handover', true);
  });

  it('a reader behind a writer of another process, a writer after it', async () => {
    await vanished('etcd-vanished-read', false, [undefined, 'read', undefined]);
  });

  it('a permit waiter behind a permit of another process', async () => {
    await vanished('etcd-vanished-permit', false, [1, 1, 1]);
  });
});
