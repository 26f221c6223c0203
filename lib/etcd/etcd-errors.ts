import { DescribedFailure, type FailureKind } from '../errors/failure-hint';
import { ETCD_AUTH_NEEDED, ETCD_CIRCUIT_OPEN, ETCD_NO_ANSWER, ETCD_REFUSED } from './etcd.messages';

/** etcd's or etcd3's words for a request refused for want of (good) credentials. */
const AUTH =
  /user name is empty|authentication failed|invalid auth token|permission denied|user name not found|UNAUTHENTICATED/i;
/** gRPC's words for a connection that could not be made or was lost. */
const REFUSED =
  /UNAVAILABLE|ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|No connection established/;
const NO_ANSWER = /DEADLINE_EXCEEDED|Deadline exceeded/i;

/**
 * The failures of etcd in words, and what was the last real one: etcd3's circuit breaker,
 * once open, fails calls with "Execution prevented because the circuit breaker is open" and
 * nothing else, so the last error before it is kept and named in its place.
 * @internal
 */
export class EtcdErrors {
  /** The last failure in words (without its hint), its kind and etcd3's error. */
  private last?: { words: string; kind: FailureKind; cause: unknown };

  constructor(
    /** The endpoints, as the messages name them. */
    private readonly hosts: string,
  ) {}

  /** `error` in words (a `DescribedFailure` with its kind), or as it is when unknown. */
  describe(error: unknown): Error {
    if (error instanceof DescribedFailure) return error;
    if (isBrokenCircuit(error)) {
      const last = this.last;
      if (!last) return toError(error);
      return new DescribedFailure(ETCD_CIRCUIT_OPEN(last.words), last.kind, last.cause);
    }
    const detail = toError(error).message;
    const kind: FailureKind | undefined = AUTH.test(detail)
      ? 'auth'
      : NO_ANSWER.test(detail)
        ? 'timeout'
        : REFUSED.test(detail)
          ? 'refused'
          : undefined;
    if (!kind) return toError(error);
    const words =
      kind === 'auth'
        ? ETCD_AUTH_NEEDED(this.hosts, detail)
        : kind === 'timeout'
          ? ETCD_NO_ANSWER(this.hosts, detail)
          : ETCD_REFUSED(this.hosts, detail);
    this.last = { words, kind, cause: error };
    return new DescribedFailure(words, kind, error);
  }
}

function isBrokenCircuit(error: unknown): boolean {
  return (error as { isBrokenCircuitError?: unknown } | null)?.isBrokenCircuitError === true;
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
