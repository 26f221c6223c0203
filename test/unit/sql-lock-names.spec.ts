import { MysqlDialect, MYSQL_ERROR_CODES } from '../../lib/mysql/mysql-dialect';
import { PostgresDialect } from '../../lib/postgres/postgres-dialect';

const target = { label: 'x', node: 'n', user: 'u', database: 'd' };
// lockName needs no pool: no connection is made.
const pool = {} as never;

describe('SQL lock names', () => {
  it('PostgreSQL: a key is the first 8 bytes of its SHA-256, as a signed bigint', () => {
    const pg = new PostgresDialect(pool, false, target, 1);
    // Pinned, not recomputed: SHA-256('lock:product:1') starts b14bc1f7ec5fb3c4, which read as
    // a signed 64-bit number is this. Every release must map a key to the same advisory lock, or
    // two versions of an app deployed side by side would not exclude each other.
    expect(pg.lockName('lock:product:1')).toBe('-5671226035176229948');
    expect(pg.lockName('lock:product:1')).not.toBe(pg.lockName('lock:product:2'));
    const n = BigInt(pg.lockName('lock:x'));
    expect(n >= -(2n ** 63n) && n < 2n ** 63n).toBe(true);
  });

  it('MySQL: short lowercase names as they are; longer ones or capitals as 64 hex digits', () => {
    const my = new MysqlDialect(pool, false, target, MYSQL_ERROR_CODES, 1);
    expect(my.lockName('lock:product:1')).toBe('lock:product:1');
    const long = `lock:${'x'.repeat(59)}`;
    expect(long).toHaveLength(64);
    expect(my.lockName(long)).toMatch(/^[0-9a-f]{64}$/);
    expect(my.lockName(long.slice(0, 63))).toBe(long.slice(0, 63));
    // Pinned like the PostgreSQL id above: SHA-256('lock:Sku:A') in hex.
    expect(my.lockName('lock:Sku:A')).toBe(
      '44d9dbcd3901cb66f460a9f313b6c7f86c44f5fa5a4fe5a73a2040af3d513aae',
    );
    expect(my.lockName('lock:Sku:A')).not.toBe(my.lockName('lock:sku:a'));
  });
});
