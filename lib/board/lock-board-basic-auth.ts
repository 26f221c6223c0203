import { timingSafeEqual } from 'node:crypto';
import { LockConfigError } from '../errors';
import { BOARD_EMPTY_PASSWORD } from './board.messages';
import type { LockBoardGuard } from './lock-board-options.interface';

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * A board guard asking for HTTP Basic credentials (the browser shows its login box); lets in
 * the user it names, who is recorded with a force release.
 *
 * @example
 * ```ts
 * LockBoardModule.forRoot({
 *   guard: lockBoardBasicAuth({ user: 'ops', password: process.env.LOCK_BOARD_PASSWORD! }),
 * });
 * ```
 * @throws LockConfigError for an empty password (an unset environment variable, usually)
 * @publicApi
 */
export function lockBoardBasicAuth(credentials: {
  user: string;
  password: string;
}): LockBoardGuard {
  if (!credentials.password) {
    throw new LockConfigError(BOARD_EMPTY_PASSWORD, 'lockBoardBasicAuth');
  }
  return ({ headers }) => {
    const header = headers.authorization ?? '';
    if (!header.startsWith('Basic ')) return false;
    const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return false;
    const user = decoded.slice(0, colon);
    const ok = same(user, credentials.user) && same(decoded.slice(colon + 1), credentials.password);
    return ok ? user : false;
  };
}
