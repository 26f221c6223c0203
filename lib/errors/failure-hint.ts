import { FAILURE_HINTS } from './error.messages';

/**
 * What kind of cause a lock server's failure has, as far as its backend could tell: it picks
 * the one hint a `LockBackendError`'s message ends with (a 503's log line).
 */
export type FailureKind = keyof typeof FAILURE_HINTS;

/** Node's socket error codes, for errors no backend described (a driver's own). */
const NODE_CODES: Readonly<Record<string, FailureKind>> = {
  ECONNREFUSED: 'refused',
  ECONNRESET: 'refused',
  EHOSTUNREACH: 'refused',
  ENETUNREACH: 'refused',
  ENOTFOUND: 'host',
  EAI_AGAIN: 'host',
  ETIMEDOUT: 'timeout',
};

/** How deep a chain of causes is followed. */
const MAX_CAUSES = 5;

/**
 * A lock server's error in a backend's words, with its kind: the message ends with the kind's
 * hint (so a startup warning shows it too), the driver's error is the `cause`.
 * @internal
 */
export class DescribedFailure extends Error {
  constructor(
    message: string,
    readonly kind: FailureKind,
    cause?: unknown,
  ) {
    super(kind === 'unknown' ? message : `${message} ${FAILURE_HINTS[kind]}`, { cause });
    this.name = 'DescribedFailure';
  }
}

/**
 * The kind of `error`'s cause: a backend's `DescribedFailure` says; otherwise Node's socket
 * codes along its chain of causes (Redis and other drivers), else 'unknown'.
 */
export function failureKind(error: unknown): FailureKind {
  let at: unknown = error;
  for (let depth = 0; depth < MAX_CAUSES && at instanceof Error; depth++) {
    if (at instanceof DescribedFailure) return at.kind;
    const code = (at as { code?: unknown }).code;
    if (typeof code === 'string' && NODE_CODES[code]) return NODE_CODES[code];
    at = at.cause;
  }
  return 'unknown';
}

/**
 * The hint that ends a `LockBackendError`'s message, picked from its first failure's cause:
 * auth, unknown database, refused, unknown host, timeout; "reachable" when unknown.
 */
export function failureHint(failures: readonly Error[]): string {
  return FAILURE_HINTS[failureKind(failures[0])];
}
