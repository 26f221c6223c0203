import { readFileSync } from 'node:fs';
import { lockOrderGraph } from './lock-order-route';
import type { IncomingMessage, ServerResponse } from 'node:http';
import * as path from 'node:path';
import { LockConfigError } from '../errors';
import { BOARD_RELEASE_UNCONFIRMED, BOARD_UNSUPPORTED_PLATFORM } from './board.messages';
import type { EventFilter } from './board-data';
import type { ResolvedLockBoardOptions } from './lock-board-options.interface';
import type { LockBoardService } from './lock-board.service';

/**
 * The page's files: name in the URL -> where it is and its type. Scripts are `.mjs`: the package
 * check wants a source map beside every `.js` of dist/.
 */
const ASSETS: Record<string, { file: string; vendor?: string; type: string }> = {
  'board.mjs': { file: 'board.mjs', type: 'text/javascript; charset=utf-8' },
  'board.css': { file: 'board.css', type: 'text/css; charset=utf-8' },
  'lock-order-panel.mjs': { file: 'lock-order-panel.mjs', type: 'text/javascript; charset=utf-8' },
  'uPlot.mjs': {
    file: 'uPlot.mjs',
    vendor: 'uplot/dist/uPlot.esm.js',
    type: 'text/javascript; charset=utf-8',
  },
  'uPlot.min.css': {
    file: 'uPlot.min.css',
    vendor: 'uplot/dist/uPlot.min.css',
    type: 'text/css; charset=utf-8',
  },
};
/** The header a force release must carry: a cross-site form cannot set it. */
export const ACTION_HEADER = 'x-lock-board';
/** Heartbeat of an idle event stream, ms (proxies close silent connections). */
const HEARTBEAT_MS = 15_000;

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** A file of the page, read once: from `ui/` beside this file, or the chart's package. */
function loadAsset(name: string): Buffer {
  const asset = ASSETS[name] ?? { file: name };
  try {
    return readFileSync(path.join(__dirname, 'ui', asset.file));
  } catch (err) {
    // Running from the sources (tests): the chart library is in node_modules, not vendored yet.
    if (!asset.vendor) throw err;
    return readFileSync(require.resolve(asset.vendor));
  }
}

/** What the Express and Fastify adapters of Nest give us. */
interface HttpAdapterLike {
  getType(): string;
  getInstance(): unknown;
}
interface ExpressLike {
  use(path: string, handler: (req: IncomingMessage, res: ServerResponse) => void): void;
}
interface FastifyLike {
  route(route: {
    method: string[];
    url: string;
    handler: (request: { raw: IncomingMessage }, reply: FastifyReply) => void;
  }): void;
}
interface FastifyReply {
  raw: ServerResponse;
  hijack(): void;
}

/**
 * The board's routes on the application's own server: the page, its files, the JSON views, the
 * live stream (server-sent events) and the force release. Written against Node's request and
 * response, so Express and Fastify share every line but the mount.
 * @internal
 */
export class BoardHttp {
  private readonly files = new Map<string, Buffer>();
  private readonly streams = new Set<ServerResponse>();

  constructor(
    private readonly board: LockBoardService,
    private readonly options: ResolvedLockBoardOptions,
  ) {}

  /** Mounts every route under `options.path`. */
  mount(adapter: HttpAdapterLike): void {
    const base = this.options.path;
    const type = adapter.getType();
    if (type === 'express') {
      (adapter.getInstance() as ExpressLike).use(base, (req, res) => void this.handle(req, res));
    } else if (type === 'fastify') {
      const fastify = adapter.getInstance() as FastifyLike;
      const handler = (request: { raw: IncomingMessage }, reply: FastifyReply) => {
        reply.hijack();
        void this.handle(request.raw, reply.raw);
      };
      for (const url of [base, `${base}/*`]) {
        fastify.route({ method: ['GET', 'POST'], url, handler });
      }
    } else {
      throw new LockConfigError(BOARD_UNSUPPORTED_PLATFORM(type), 'LockBoardModule');
    }
  }

  /** Ends every live stream (shutdown). */
  close(): void {
    for (const res of this.streams) res.end();
    this.streams.clear();
  }

  /** One request: guard first, then the route. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = new URL(
        (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/',
        'http://x',
      );
      const route = url.pathname.slice(this.options.path.length);
      const who = await this.admit(req);
      if (who === false) {
        res.writeHead(401, {
          'content-type': 'application/json',
          'www-authenticate': 'Basic realm="lock board", charset="UTF-8"',
          'cache-control': 'no-store',
        });
        res.end(JSON.stringify({ message: 'The lock board needs credentials.' }));
        return;
      }
      await this.route(req, res, route, url.searchParams, who);
    } catch (err) {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: (err as Error).message }));
      } else res.end();
    }
  }

  /** Who the guard lets in (a name, or `'guard'`), or false. */
  private async admit(req: IncomingMessage): Promise<string | false> {
    const { guard } = this.options;
    if (!guard) return 'anyone';
    const verdict = await guard({
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      headers: req.headers,
      ip: req.socket?.remoteAddress,
    });
    if (verdict === false) return false;
    return typeof verdict === 'string' && verdict !== '' ? verdict : 'guard';
  }

  private async route(
    req: IncomingMessage,
    res: ServerResponse,
    route: string,
    query: URLSearchParams,
    who: string,
  ): Promise<void> {
    if (req.method === 'POST') {
      if (route === '/api/release') return this.release(req, res, query, who);
      return this.send(res, 404, { message: 'Not found.' });
    }
    if (route === '') {
      // Relative links of the page resolve under the board's path only with the slash.
      res.writeHead(302, { location: `${this.options.path}/` });
      res.end();
      return;
    }
    if (route === '/' || route === '/index.html') return this.asset(res, 'index.html');
    if (route.startsWith('/assets/')) return this.asset(res, route.slice('/assets/'.length));
    if (route === '/api/overview') return this.send(res, 200, await this.overview(query));
    if (route === '/api/key') {
      const page = await this.board.keyPage(query.get('group') ?? '', query.get('key') ?? '');
      return page ? this.send(res, 200, page) : this.send(res, 404, { message: 'No such group.' });
    }
    if (route === '/api/stream') return this.stream(req, res, query);
    if (route === '/api/lock-order') return this.send(res, 200, lockOrderGraph(this.board.locks));
    this.send(res, 404, { message: 'Not found.' });
  }

  private overview(query: URLSearchParams) {
    return this.board.overview({
      search: query.get('q') ?? '',
      group: query.get('group') || undefined,
      page: Number(query.get('page')) || 1,
      events: eventFilter(query.get('events')),
    });
  }

  /** Pushes the view the page shows whenever it changes (at most every `refreshInterval`). */
  private stream(req: IncomingMessage, res: ServerResponse, query: URLSearchParams): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    this.streams.add(res);
    let last = '';
    let quiet = 0;
    let timer: NodeJS.Timeout | undefined;
    let open = true;
    const read = () =>
      query.get('view') === 'key'
        ? this.board.keyPage(query.get('group') ?? '', query.get('key') ?? '')
        : this.overview(query);
    const tick = async () => {
      const started = Date.now();
      try {
        const data = JSON.stringify(await read());
        // `now` changes every time: compare without it.
        const shape = data.replace(/"now":\d+,?/, '');
        if (shape !== last) {
          last = shape;
          quiet = 0;
          res.write(`data: ${data}\n\n`);
        } else if ((quiet += this.options.refreshInterval) >= HEARTBEAT_MS) {
          quiet = 0;
          res.write(': still here\n\n');
        }
      } catch (err) {
        res.write(
          `event: failure\ndata: ${JSON.stringify({ message: (err as Error).message })}\n\n`,
        );
      }
      // The interval counts from the start of this view: a slow read does not add to it.
      const wait = Math.max(50, this.options.refreshInterval - (Date.now() - started));
      if (open) timer = setTimeout(tick, wait);
    };
    req.on('close', () => {
      open = false;
      clearTimeout(timer);
      this.streams.delete(res);
    });
    void tick();
  }

  private async release(
    req: IncomingMessage,
    res: ServerResponse,
    query: URLSearchParams,
    who: string,
  ): Promise<void> {
    if (!this.options.actions) {
      return this.send(res, 403, { message: 'This board is read-only (actions: false).' });
    }
    if (req.headers[ACTION_HEADER] !== 'release') {
      return this.send(res, 403, {
        message: `A release needs the header ${ACTION_HEADER}: release.`,
      });
    }
    const key = query.get('key') ?? '';
    if (key === '' || query.get('confirm') !== key) {
      return this.send(res, 400, { message: BOARD_RELEASE_UNCONFIRMED });
    }
    const outcome = await this.board.forceRelease(query.get('group') ?? '', key, who);
    this.send(res, outcome.released ? 200 : 409, outcome);
  }

  private asset(res: ServerResponse, name: string): void {
    if (name !== 'index.html' && !ASSETS[name])
      return this.send(res, 404, { message: 'Not found.' });
    let body = this.files.get(name);
    if (!body) {
      body = loadAsset(name);
      this.files.set(name, body);
    }
    const type = ASSETS[name]?.type ?? 'text/html; charset=utf-8';
    res.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache', ...SECURITY_HEADERS });
    res.end(body);
  }

  private send(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      ...SECURITY_HEADERS,
    });
    res.end(JSON.stringify(body));
  }
}

const FILTERS: readonly EventFilter[] = [
  'problems',
  'all',
  'lost',
  'expired',
  'busy',
  'error',
  'forced',
];

/** The `events` parameter, or the default for anything else. */
function eventFilter(raw: string | null): EventFilter {
  return FILTERS.find((f) => f === raw) ?? 'problems';
}
