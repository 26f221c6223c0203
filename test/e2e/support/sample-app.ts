import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Database from 'better-sqlite3';
import { AppModule } from '../../../sample/app.module';
import { loadSampleConfig } from '../../../sample/config/sample.config';

export { startSampleCluster, type SampleCluster } from '../../../scripts/sample-cluster';

/** A fresh directory under the OS temp dir; `remove()` deletes it. */
export function tempDir(name: string): { path: string; remove: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `nest-locked-${name}-`));
  return { path: dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The sample app in this process (for supertest), configured as the environment would:
 * `env` holds the sample's variables (REDIS_URL, SAMPLE_DB_PATH, ...).
 */
export async function createSampleApp(env: Record<string, string>): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [AppModule.forRoot(loadSampleConfig(env))],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}

/** The shared SQLite file, read-only, to check what the instances wrote. */
export function openShopDb(dbPath: string): Database.Database {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 10000');
  return db;
}
