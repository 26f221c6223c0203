import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { Server } from 'node:http';
import { AppModule } from './app.module';
import { loadSampleConfig } from './config/sample.config';

/** Printed once listening; launchers wait for it and read the port (PORT=0 picks a free one). */
const READY_LINE = 'nest-locked sample listening on';

async function bootstrap(): Promise<void> {
  const config = loadSampleConfig();
  const app = await NestFactory.create(AppModule.forRoot(config), { logger: config.logLevels });
  // SIGTERM/SIGINT close the app: locks held are released, Redis and SQLite closed.
  app.enableShutdownHooks();
  await app.listen(config.port, config.host);
  const address = (app.getHttpServer() as Server).address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  process.stdout.write(
    `${READY_LINE} http://${config.host}:${port} (instance ${config.instance}, pid ${process.pid})\n`,
  );
}

bootstrap().catch((err: unknown) => {
  process.stderr.write(`sample failed to start: ${err instanceof Error ? err.stack : err}\n`);
  process.exit(1);
});
