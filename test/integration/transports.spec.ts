import { EventEmitter } from 'node:events';
import {
  Controller,
  type INestApplication,
  Injectable,
  type WebSocketAdapter,
  type WsMessageHandler,
} from '@nestjs/common';
import {
  ClientProxyFactory,
  MessagePattern,
  Payload,
  type ClientProxy,
  Transport,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { firstValueFrom, type Observable } from 'rxjs';
import { Locked, type LockHandle, LockService, RedlockModule } from 'nest-locked';
import { closedPort } from '../support/redis-server';

jest.setTimeout(30_000);

/**
 * Issue 26, items 1-2: a busy lock reaches a WebSocket client and a hybrid app's microservice
 * client as the documented `{ code, message, retryAfter }`, with no setup beyond forRoot (Nest's
 * global interceptors reach neither). Real Nest applications; the locks in memory (the mapping
 * is the same whatever the backend).
 */

@Injectable()
class Reports {
  @Locked('report:{id}', { waitTimeout: 0 })
  async build(id: string): Promise<{ built: string }> {
    return { built: id };
  }
}

@WebSocketGateway()
class ReportsGateway {
  constructor(private readonly reports: Reports) {}

  @SubscribeMessage('build')
  build(@MessageBody() id: string) {
    return this.reports.build(id);
  }
}

@Controller()
class ReportsRpc {
  constructor(private readonly reports: Reports) {}

  @MessagePattern('build')
  build(@Payload() id: string) {
    return this.reports.build(id);
  }
}

/** One in-process client of the adapter below: what the gateway emits to it is recorded. */
class Client extends EventEmitter {
  readonly received: [string, unknown][] = [];
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (typeof event === 'string') this.received.push([event, args[0]]);
    return super.emit(event, ...args);
  }
  /** Sends `event` to the gateway; resolves with the next thing emitted back. */
  send(event: string, data: unknown): Promise<[string, unknown]> {
    const seen = this.received.length;
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`no answer to ${event}`)), 5_000);
      const poll = setInterval(() => {
        if (this.received.length <= seen) return;
        clearTimeout(deadline);
        clearInterval(poll);
        resolve(this.received[seen]);
      }, 5);
      super.emit('message', { event, data });
    });
  }
}

/**
 * A WebSocket adapter without a network (neither ws nor socket.io is installed here): Nest's
 * gateway pipeline (context, interceptors, exception filter) is the same over any adapter.
 */
class InProcessAdapter implements WebSocketAdapter<EventEmitter, Client> {
  server?: EventEmitter;
  create(): EventEmitter {
    return (this.server = new EventEmitter());
  }
  bindClientConnect(server: EventEmitter, callback: (client: Client) => void): void {
    server.on('connection', callback);
  }
  bindMessageHandlers(
    client: Client,
    handlers: WsMessageHandler[],
    transform: (data: unknown) => Observable<unknown>,
  ): void {
    client.on('message', ({ event, data }: { event: string; data: unknown }) => {
      const handler = handlers.find((h) => h.message === event);
      if (!handler) return;
      transform(handler.callback(data)).subscribe((reply) => client.emit(event, reply));
    });
  }
  connect(): Client {
    const client = new Client();
    this.server?.emit('connection', client);
    return client;
  }
  close(server: EventEmitter): void {
    server.removeAllListeners();
  }
  /** Called by Nest on app.close() (the interface does not declare it). */
  dispose(): void {
    this.server = undefined;
  }
}

describe('a busy lock on every transport, with forRoot alone', () => {
  let app: INestApplication;
  let adapter: InProcessAdapter;
  let holder: LockHandle | undefined;
  beforeEach(async () => {
    app = await createApp();
    adapter = new InProcessAdapter();
    app.useWebSocketAdapter(adapter);
  });
  afterEach(async () => {
    await holder?.release();
    holder = undefined;
    await app?.close();
  });

  async function createApp(): Promise<INestApplication> {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ backend: 'memory' })],
      providers: [Reports, ReportsGateway],
      controllers: [ReportsRpc],
    }).compile();
    return moduleRef.createNestApplication({ logger: false });
  }

  it('a WebSocket gateway answers { status, code, message, retryAfter }', async () => {
    await app.init();
    const client = adapter.connect();
    expect(await client.send('build', 'daily')).toEqual(['build', { built: 'daily' }]);

    holder = await app.get(LockService).acquire('report:daily');
    const [event, body] = await client.send('build', 'daily');
    expect(event).toBe('exception');
    expect(body).toEqual({
      status: 'error',
      code: 'LOCK_NOT_ACQUIRED',
      message: expect.stringMatching(/busy/i),
      retryAfter: 1,
    });
  });

  it('a hybrid app (connectMicroservice, no inheritAppConfig) answers a TCP client with the code', async () => {
    const port = await closedPort();
    app.connectMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
    await app.startAllMicroservices();
    await app.init();
    const client: ClientProxy = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    try {
      await expect(firstValueFrom(client.send('build', 'weekly'))).resolves.toEqual({
        built: 'weekly',
      });
      holder = await app.get(LockService).acquire('report:weekly');
      const error = await firstValueFrom(client.send('build', 'weekly')).catch((e: unknown) => e);
      expect(error).toMatchObject({
        statusCode: 409,
        code: 'LOCK_NOT_ACQUIRED',
        message: expect.stringMatching(/busy/i),
        retryAfter: 1,
      });
    } finally {
      client.close();
    }
  });
});
