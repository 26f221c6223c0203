import { Injectable, type INestApplication } from '@nestjs/common';
import {
  LockConfigError,
  Locked,
  LockNotAcquiredError,
  LockService,
  type RedlockModuleOptions,
} from 'nest-locked';
import { mysqlBackend } from 'nest-locked/mysql';
import { createLockApp, uniquePrefix } from '../../support/lock-app';
import { type MariadbServerHandle, startMariadb } from '../../support/mariadb-server';
import { describeSqlBackend } from '../../support/sql-backend-suite';
import { mysqlUnderTest } from '../../support/sql-backends';

@Injectable()
class Reports {
  @Locked('report:{id}', { mode: 'read' })
  async read(id: string): Promise<string> {
    return id;
  }
}

let db: MariadbServerHandle;
beforeAll(async () => {
  db = await startMariadb();
}, 60_000);
afterAll(() => db?.stop());

describe('mysqlBackend (real MariaDB)', () => describeSqlBackend(mysqlUnderTest, () => db));

/** What MySQL does differently: no shared holds, and its lock names. */
describe('mysqlBackend: refusals and lock names (real MariaDB)', () => {
  const apps: INestApplication[] = [];
  let prefix: string;
  const options = (): RedlockModuleOptions => ({
    backend: mysqlBackend(db.config),
    keyPrefix: prefix,
  });
  const locks = async (): Promise<LockService> => {
    const app = await createLockApp({ options: options() });
    apps.push(app);
    return app.get(LockService);
  };

  beforeEach(() => (prefix = uniquePrefix('my')));
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  it("refuses @Locked with mode: 'read' at startup", async () => {
    await expect(createLockApp({ options: options(), providers: [Reports] })).rejects.toThrow(
      LockConfigError,
    );
  });

  it('refuses read locks and permits in LockService.using and acquire', async () => {
    const service = await locks();
    await expect(service.using('k', () => 1, { mode: 'read' })).rejects.toThrow(LockConfigError);
    await expect(service.acquire('k', { permits: 3 })).rejects.toThrow(
      /mysql backend has no permits/,
    );
  });

  it('locks keys over 64 characters and keys differing only in case as distinct locks', async () => {
    const [a, b] = [await locks(), await locks()];
    const long = `order:${'x'.repeat(200)}`;
    const held = await a.acquire([long, 'Sku:A']);
    const other = await b.acquire('sku:a', { waitTimeout: 0 });
    await expect(b.acquire(long, { waitTimeout: 0 })).rejects.toThrow(LockNotAcquiredError);
    expect(await b.isLocked(long)).toBe(true);
    await other.release();
    await held.release();
    expect(await b.isLocked(long)).toBe(false);
  });
});
