import { Logger } from '@nestjs/common';
import { Etcd3 } from 'etcd3';
import { etcdBackend, type EtcdBackendOptions } from 'nest-locked/etcd';
import type { LockBackend } from '../../../lib/core/lock-backend';
import { startEtcdCluster, type EtcdCluster } from '../../support/etcd-server';
import { uniquePrefix } from '../../support/lock-app';
import { closedPort } from '../../support/redis-server';

/**
 * What etcd's errors say (real etcd): a wrong port at startup and per request, while etcd3's
 * circuit breaker is open, and an etcd with authentication enabled and no credentials given.
 */

const backends: LockBackend[] = [];

function backend(options: EtcdBackendOptions): LockBackend {
  const created = etcdBackend(options).create({
    group: 'default',
    keyPrefix: uniquePrefix('etcd-msg'),
    driftFactor: 0.01,
    commandTimeout: 1_000,
    logger: new Logger('etcd-messages'),
  });
  backends.push(created);
  return created;
}

beforeAll(() => Logger.overrideLogger(false));
afterEach(async () => {
  await Promise.all(backends.splice(0).map((b) => b.close()));
});

describe('etcd messages: a wrong port', () => {
  it('at startup: the refused connection and where, with no lock named', async () => {
    const port = await closedPort();
    const error = (await backend({ hosts: `127.0.0.1:${port}` }).start!().then(
      () => undefined,
      (e: unknown) => e,
    )) as Error;
    expect(error).toBeInstanceOf(Error);
    expect(error.message).not.toMatch(/lock\s*:/);
    expect(error.message).toMatch(/ECONNREFUSED/);
    expect(error.message).toContain(`127.0.0.1:${port}`);
    expect(error.message).toMatch(/running and listening/);
  });

  it('per request, once the circuit breaker is open: still the real cause, as message and cause', async () => {
    const port = await closedPort();
    const b = backend({ hosts: `127.0.0.1:${port}` });
    const errors: Error[] = [];
    // etcd3 opens its circuit after 3 failures in a row: later calls fail without a try.
    for (let i = 0; i < 6; i++) {
      errors.push(
        (await b.acquire(['k'], { ttl: 1_000, waitTimeout: 0 }).catch((e: unknown) => e)) as Error,
      );
    }
    for (const error of errors) {
      expect(error).toMatchObject({ name: 'LockBackendError' });
      expect(error.message).toMatch(/ECONNREFUSED/);
      expect(error.message).not.toMatch(/reachable/);
      expect(String((error.cause as Error).message)).toMatch(/ECONNREFUSED/);
    }
  });
});

describe('etcd messages: authentication enabled', () => {
  let etcd: EtcdCluster;

  beforeAll(async () => {
    etcd = await startEtcdCluster(1);
    const admin = new Etcd3({ hosts: etcd.hosts });
    try {
      await admin.role('root').create();
      await admin.user('root').create('secret');
      await admin.user('root').addRole('root');
      await admin.auth.authEnable({});
    } finally {
      admin.close();
    }
  });
  afterAll(() => etcd?.stop());

  it('no credentials: startup fails with a message that says to pass them', async () => {
    const error = (await backend({ hosts: etcd.hosts }).start!().then(
      () => undefined,
      (e: unknown) => e,
    )) as Error;
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toMatch(/authentication/);
    expect(error.message).toMatch(/clientOptions: \{ auth: \{ username, password \} \}/);
  });

  it('a wrong password: startup fails naming it', async () => {
    const error = (await backend({
      hosts: etcd.hosts,
      clientOptions: { auth: { username: 'root', password: 'wrong' } },
    }).start!().then(
      () => undefined,
      (e: unknown) => e,
    )) as Error;
    expect(error.message).toMatch(/authentication failed/);
    expect(error.message).toMatch(/Check the user and password/);
  });

  it('with credentials: startup and a lock work', async () => {
    const b = backend({
      hosts: etcd.hosts,
      clientOptions: { auth: { username: 'root', password: 'secret' } },
    });
    await b.start!();
    const lease = await b.acquire(['k'], { ttl: 1_000, waitTimeout: 0 });
    await b.release(lease);
  });
});
