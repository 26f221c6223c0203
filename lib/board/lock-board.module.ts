import {
  type BeforeApplicationShutdown,
  type DynamicModule,
  Inject,
  Injectable,
  Logger,
  Module,
  type OnModuleInit,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { LockService } from '../api/lock.service';
import { LockGroupRegistry } from '../module/lock-group.registry';
import { BOARD_NO_HTTP, BOARD_PUBLIC } from './board.messages';
import { BoardHttp } from './board-http';
import type { LockBoardOptions, ResolvedLockBoardOptions } from './lock-board-options.interface';
import { LOCK_BOARD_OPTIONS, resolveBoardOptions } from './lock-board-options';
import { LockBoardService } from './lock-board.service';

/** Starts the board with the application and mounts its routes. @internal */
@Injectable()
export class LockBoardMount implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('nest-locked:board');
  readonly board: LockBoardService;
  private http?: BoardHttp;

  constructor(
    @Inject(LOCK_BOARD_OPTIONS) private readonly options: ResolvedLockBoardOptions,
    locks: LockService,
    registry: LockGroupRegistry,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.board = new LockBoardService(options, locks, registry);
  }

  onModuleInit(): void {
    const adapter = this.adapterHost.httpAdapter;
    if (adapter) {
      if (!this.options.guard) this.logger.warn(BOARD_PUBLIC(this.options.path));
      this.http = new BoardHttp(this.board, this.options);
      this.http.mount(adapter);
    } else {
      this.logger.log(BOARD_NO_HTTP(this.options.instance));
    }
    // Every instance publishes its view and events, HTTP or not: a worker (an application
    // context, a microservice, a queue consumer) holds locks too, and any page shows them.
    this.board.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.http?.close();
    await this.board.stop();
  }
}

/**
 * A page that shows, live and across every instance of the app, the locks held, each key's
 * waiting line, hot keys, recent lost / busy / error events and the lock servers' health.
 * Import it beside `RedlockModule` (global, its default). Without a `guard` it refuses to
 * mount unless `public: true` says so.
 *
 * @example
 * ```ts
 * import { LockBoardModule, lockBoardBasicAuth } from 'nest-locked/board';
 *
 * @Module({
 *   imports: [
 *     RedlockModule.forRoot({ clients: [process.env.REDIS_URL!] }),
 *     LockBoardModule.forRoot({
 *       path: '/locks',
 *       guard: lockBoardBasicAuth({ user: 'ops', password: process.env.LOCK_BOARD_PASSWORD! }),
 *     }),
 *   ],
 * })
 * export class AppModule {}
 * ```
 * @publicApi
 */
@Module({})
export class LockBoardModule {
  /** @throws LockConfigError without a guard (unless `public: true`), or with a bad option */
  static forRoot(options: LockBoardOptions): DynamicModule {
    return {
      module: LockBoardModule,
      providers: [
        { provide: LOCK_BOARD_OPTIONS, useValue: resolveBoardOptions(options) },
        LockBoardMount,
      ],
    };
  }
}
