import { LockConfigError } from '../../lib';
import { resolveRedlockOptions } from '../../lib/redlock-options';

describe('resolveRedlockOptions', () => {
  it('applies the documented defaults', () => {
    const o = resolveRedlockOptions({ clients: ['redis://127.0.0.1:1'] });
    expect(o).toMatchObject({
      keyPrefix: 'lock:',
      ttl: 30_000,
      watchdog: true,
      maxHold: Infinity,
      waitTimeout: 5_000,
      busyStatus: 409,
      interceptor: true,
    });
    expect(o.groups).toEqual({ default: ['redis://127.0.0.1:1'] });
  });

  it('falls back to REDIS_URL, then to the local default server', () => {
    const saved = process.env.REDIS_URL;
    try {
      process.env.REDIS_URL = 'redis://127.0.0.1:7777';
      expect(resolveRedlockOptions().groups.default).toEqual(['redis://127.0.0.1:7777']);
      delete process.env.REDIS_URL;
      expect(resolveRedlockOptions().groups.default).toEqual(['redis://127.0.0.1:6379']);
    } finally {
      if (saved === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = saved;
    }
  });

  it('accepts named groups', () => {
    const o = resolveRedlockOptions({ clients: { default: ['redis://a'], orders: ['redis://b'] } });
    expect(Object.keys(o.groups)).toEqual(['default', 'orders']);
  });

  it.each([
    [{ ttl: 0 }, 'ttl'],
    [{ ttl: -1 }, 'ttl'],
    [{ ttl: Number.NaN }, 'ttl'],
    [{ waitTimeout: -1 }, 'waitTimeout'],
    [{ maxHold: -3 }, 'maxHold'],
    [{ busyStatus: 200 }, 'busyStatus'],
    [{ keyPrefix: 5 }, 'keyPrefix'],
    [{ clients: {} }, 'clients'],
    [{ clients: { orders: [] } }, 'clients.orders'],
    [{ clients: [''] }, 'clients.default[0]'],
    [{ driftFactor: 2 }, 'driftFactor'],
    [{ localHandoffs: -1 }, 'localHandoffs'],
  ])('rejects %j with LockConfigError naming %s and the value', (options, field) => {
    let error: unknown;
    try {
      resolveRedlockOptions(options as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as LockConfigError).field).toBe(field);
    expect((error as Error).message).toContain(`"${field}"`);
  });
});
