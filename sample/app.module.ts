import { type DynamicModule, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { RedlockModule } from 'nest-locked';
import { LockBoardModule, lockBoardBasicAuth } from 'nest-locked/board';
import { postgresBackend } from 'nest-locked/postgres';
import { AccountsModule } from './accounts/accounts.module';
import { SAMPLE_CONFIG, type SampleConfig, loadSampleConfig } from './config/sample.config';
import { SampleConfigModule } from './config/sample-config.module';
import { DatabaseModule } from './database/database.module';
import { HealthController } from './health.controller';
import { JobsModule } from './jobs/jobs.module';
import { OrdersModule } from './orders/orders.module';
import { ProductsModule } from './products/products.module';
import { ReportsModule } from './reports/reports.module';

/**
 * The flash-sale shop. `AppModule.forRoot()` reads the environment; tests pass a config.
 */
@Module({})
export class AppModule {
  static forRoot(config: SampleConfig = loadSampleConfig()): DynamicModule {
    return {
      module: AppModule,
      imports: [
        SampleConfigModule.forRoot(config),
        // The async path, as with @nestjs/config: the factory gets its settings by injection.
        // One URL is a single-node lock; several are a Redlock quorum over independent servers;
        // a PostgreSQL URL puts the locks in that database instead.
        RedlockModule.forRootAsync({
          inject: [SAMPLE_CONFIG],
          useFactory: (c: SampleConfig) => ({
            ...(c.lockPostgresUrl
              ? { backend: postgresBackend({ connectionString: c.lockPostgresUrl }) }
              : { clients: [...c.redisUrls] }),
            waitTimeout: c.lockWaitMs,
            ttl: c.lockTtlMs,
          }),
        }),
        // The lock board at /locks: every instance's locks, lines and lost leases (user `ops`).
        LockBoardModule.forRoot({
          guard: lockBoardBasicAuth({ user: 'ops', password: config.boardPassword }),
          instance: config.instance,
          actions: true,
        }),
        ScheduleModule.forRoot(),
        DatabaseModule,
        ProductsModule,
        AccountsModule,
        OrdersModule,
        ReportsModule,
        JobsModule,
      ],
      controllers: [HealthController],
    };
  }
}
