import type { BoardOverview } from 'nest-locked/board';

/** The board's overview as `GET <url>/locks/api/overview` answers it, with `authorization`. */
export async function boardOverview(url: string, authorization: string): Promise<BoardOverview> {
  const res = await fetch(`${url}/locks/api/overview`, { headers: { authorization } });
  return (await res.json()) as BoardOverview;
}

/** Reads until `check` holds (a condition, never a sleep used as a barrier); fails naming `what`. */
export async function readUntil<T>(
  what: string,
  read: () => Promise<T>,
  check: (v: T) => boolean,
  ms = 20_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await read();
    if (check(last)) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what}: not within ${ms} ms; last: ${JSON.stringify(last)}`);
}
