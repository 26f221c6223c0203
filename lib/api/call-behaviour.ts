import type { LockedOptions } from '../interfaces';
import type { ClassSet } from '../lock-order/lock-class';
import type { AcquireRequest, LockBackend, ReplicaAcks, Share } from '../core/lock-backend';
import { RANGES, type ResolvedRedlockOptions } from '../options/redlock-options';

/**
 * What one call (or one decorated method, resolved once) asks of the engine: its options merged
 * over the module's, its group, its shared hold, and the acquire request built from them.
 * @internal
 */
export interface Behaviour {
  /** The acquire request of a call without a signal, built on first use. */
  request?: AcquireRequest;
  /** Replica acknowledgements each acquire and renewal needs, if any. */
  acks?: ReplicaAcks;
  client: LockBackend;
  clientName: string;
  ttl: number;
  watchdog: boolean;
  maxHold: number;
  waitTimeout: number;
  segments?: number;
  minHold: number;
  mode: 'read' | 'write';
  permits: number;
  /** The engine's shared hold, if the call asks for one (read, or permits > 1). */
  share?: Share;
  /** A decorated method's `Class.method` (its holds say where they were taken). */
  site?: string;
  /** A decorated method's lock classes, interned on its first call (lock-order checking). */
  orderSet?: ClassSet;
}

/** A call's options over the module's, for the group `client` named `clientName`. @internal */
export function resolveBehaviour(
  options: LockedOptions,
  o: ResolvedRedlockOptions,
  clientName: string,
  client: LockBackend,
): Behaviour {
  return {
    client,
    clientName,
    ttl: options.ttl ?? o.ttl,
    watchdog: options.watchdog ?? o.watchdog,
    maxHold: options.maxHold ?? o.maxHold,
    waitTimeout: options.waitTimeout ?? o.waitTimeout,
    acks: replicaAcks(
      options.replicaAcks ?? o.replicaAcks,
      options.replicaAckTimeout ?? o.replicaAckTimeout,
    ),
    segments: options.segments,
    minHold: options.minHold ?? 0,
    ...sharing(options),
  };
}

function sharing(options: LockedOptions): Pick<Behaviour, 'mode' | 'permits' | 'share'> {
  const mode = options.mode ?? 'write';
  const permits = options.permits ?? 1;
  if (mode === 'read') return { mode, permits: 1, share: 'read' };
  return { mode, permits, share: permits > 1 ? permits : undefined };
}

/** The replica acknowledgement a call needs, or none. */
const replicaAcks = (replicas: number, timeout: number): ReplicaAcks | undefined =>
  replicas > 0 ? { replicas, timeout } : undefined;

/**
 * The acquire request of a call: a decorated method's behaviour is resolved once, and so is its
 * request when no signal comes.
 */
export function acquireRequest(b: Behaviour, signal: AbortSignal | undefined): AcquireRequest {
  if (signal) {
    return { ttl: leaseTtl(b), waitTimeout: b.waitTimeout, signal, acks: b.acks, share: b.share };
  }
  return (b.request ??= {
    ttl: leaseTtl(b),
    waitTimeout: b.waitTimeout,
    acks: b.acks,
    share: b.share,
  });
}

/** The lease asked for: never longer than maxHold, nor shorter than a ttl may be. */
export const leaseTtl = (b: Behaviour): number =>
  Math.max(RANGES.ttl.min, Math.ceil(Math.min(b.ttl, b.maxHold)));
