import * as http from 'node:http';
import { performance } from 'node:perf_hooks';

/**
 * A dependency-free HTTP client for the demo and the e2e tests: one request per connection (no
 * keep-alive socket outlives a request), JSON in and out, a hard timeout on every request.
 */

export interface HttpResult<T = any> {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** The JSON body, or the raw text when it is not JSON. */
  readonly body: T;
  /** Time from sending to the last byte of the answer. */
  readonly ms: number;
}

export interface HttpRequest {
  readonly method: 'GET' | 'POST';
  /** An absolute URL, e.g. `http://127.0.0.1:3000/products/1`. */
  readonly url: string;
  readonly body?: unknown;
  /** @default 30_000 */
  readonly timeoutMs?: number;
}

export function request<T = any>(req: HttpRequest): Promise<HttpResult<T>> {
  const { method, url, body, timeoutMs = 30_000 } = req;
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const outgoing = http.request(
      url,
      {
        method,
        agent: false,
        headers: payload
          ? { 'content-type': 'application/json', 'content-length': payload.length }
          : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {
            // Not JSON: keep the text.
          }
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: parsed as T,
            ms: performance.now() - startedAt,
          });
        });
      },
    );
    outgoing.setTimeout(timeoutMs, () =>
      outgoing.destroy(new Error(`${method} ${url}: no answer within ${timeoutMs} ms`)),
    );
    outgoing.on('error', reject);
    outgoing.end(payload);
  });
}

export const get = <T = any>(url: string, timeoutMs?: number) =>
  request<T>({ method: 'GET', url, timeoutMs });

export const post = <T = any>(url: string, body?: unknown, timeoutMs?: number) =>
  request<T>({ method: 'POST', url, body: body ?? {}, timeoutMs });

/** One request of a burst: its answer, or the network error that replaced it. */
export type BurstResult = HttpResult | { readonly status: 0; readonly error: Error; ms: number };

/**
 * Sends `count` requests at once (all in flight together, as a crowd of buyers would) and
 * resolves with every outcome, in order. Bounded: `count` requests, each with its own timeout.
 * `onSettled` is called after each answer, for progress.
 */
export async function burst(
  count: number,
  make: (i: number) => HttpRequest,
  onSettled?: (done: number, result: BurstResult) => void,
): Promise<BurstResult[]> {
  let done = 0;
  return Promise.all(
    Array.from({ length: count }, async (_, i): Promise<BurstResult> => {
      const startedAt = performance.now();
      let result: BurstResult;
      try {
        result = await request(make(i));
      } catch (err) {
        result = { status: 0, error: err as Error, ms: performance.now() - startedAt };
      }
      onSettled?.(++done, result);
      return result;
    }),
  );
}
