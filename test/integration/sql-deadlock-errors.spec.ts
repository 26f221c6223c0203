import { createConnection } from 'mysql2/promise';
import { Client } from 'pg';
import { LockOrderError } from 'nest-locked';
import { serverDeadlock } from '../../lib/sql/sql-errors';
import { type MariadbServerHandle, startMariadb } from '../support/mariadb-server';
import { type PostgresServerHandle, startPostgres } from '../support/postgres-server';

/**
 * A deadlock the database server detects (PRODUCT 2.11) becomes the `LockOrderError` lock-order
 * checking throws, with the server's own report. The errors come from real servers: two sessions
 * take two locks in opposite orders until the server picks a victim (PostgreSQL advisory locks:
 * `40P01`; MariaDB row locks: `ER_LOCK_DEADLOCK`). The SQL backends hand every failed acquire to
 * this mapping first (`SqlLockBackend.failure`).
 */
jest.setTimeout(90_000);

/**
 * Runs both sessions' second step and resolves with the error of the one the server refused
 * (the deadlock's victim), once `freeVictim` let the other one through.
 */
async function victimOf(
  steps: [() => Promise<unknown>, () => Promise<unknown>],
  freeVictim: (victim: number) => Promise<unknown>,
): Promise<unknown> {
  const running = steps.map((step) => step());
  const victim = await Promise.race(
    running.map((r, i) =>
      r.then(
        () => new Promise<never>(() => undefined),
        () => i,
      ),
    ),
  );
  await freeVictim(victim);
  const settled = await Promise.allSettled(running);
  const refused = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
  expect(refused).toHaveLength(1);
  return refused[0].reason;
}

describe('server-detected deadlocks map to LockOrderError', () => {
  let pg: PostgresServerHandle | undefined;
  let maria: MariadbServerHandle | undefined;
  afterAll(async () => {
    await pg?.stop();
    await maria?.stop();
  });

  it('PostgreSQL 40P01, with the processes and locks of the cycle', async () => {
    pg = await startPostgres();
    const [one, two] = [new Client(pg.config), new Client(pg.config)];
    await Promise.all([one.connect(), two.connect()]);
    try {
      await one.query('SELECT pg_advisory_lock(1)');
      await two.query('SELECT pg_advisory_lock(2)');
      const error = await victimOf(
        [
          () => one.query('SELECT pg_advisory_lock(2)'),
          () => two.query('SELECT pg_advisory_lock(1)'),
        ],
        // Session locks outlive the error: the victim lets go so the other one gets its lock.
        (victim) => [one, two][victim].query('SELECT pg_advisory_unlock_all()'),
      );
      expect((error as { code: string }).code).toBe('40P01');
      const mapped = serverDeadlock(['a', 'b'], error);
      expect(mapped).toBeInstanceOf(LockOrderError);
      expect(mapped?.detectedBy).toBe('server');
      expect(mapped?.keys).toEqual(['a', 'b']);
      expect(mapped?.cause).toBe(error);
      expect(mapped?.report).toMatch(
        /deadlock detected\nProcess \d+ waits for ExclusiveLock on advisory lock/,
      );
      expect(mapped?.message).toContain('the database server found a deadlock');
    } finally {
      await Promise.all([one.end(), two.end()]);
    }
  });

  it('MySQL/MariaDB ER_LOCK_DEADLOCK', async () => {
    maria = await startMariadb();
    await maria.sql('CREATE TABLE locks.deadlock_rows (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
    await maria.sql('INSERT INTO locks.deadlock_rows VALUES (1, 0), (2, 0)');
    const [one, two] = await Promise.all([
      createConnection(maria.config),
      createConnection(maria.config),
    ]);
    try {
      await Promise.all([one.beginTransaction(), two.beginTransaction()]);
      await one.query('UPDATE deadlock_rows SET v = 1 WHERE id = 1');
      await two.query('UPDATE deadlock_rows SET v = 1 WHERE id = 2');
      const error = await victimOf(
        [
          () => one.query('UPDATE deadlock_rows SET v = 2 WHERE id = 2'),
          () => two.query('UPDATE deadlock_rows SET v = 2 WHERE id = 1'),
        ],
        // InnoDB rolled the victim's transaction back: the other one goes on by itself.
        () => Promise.resolve(),
      );
      expect((error as { code: string }).code).toBe('ER_LOCK_DEADLOCK');
      const mapped = serverDeadlock(['a', 'b'], error);
      expect(mapped).toBeInstanceOf(LockOrderError);
      expect(mapped?.report).toMatch(/Deadlock found/);
    } finally {
      await Promise.all([one.end(), two.end()]);
    }
  });

  it('any other error is not a deadlock', () => {
    expect(serverDeadlock(['a'], Object.assign(new Error('x'), { code: '57014' }))).toBeUndefined();
    expect(serverDeadlock(['a'], new Error('no code'))).toBeUndefined();
  });
});
