import { LockConfigError } from '../errors';
import { UNKNOWN_POLICY } from '../core/core.messages';

/**
 * The engine's fast paths, each one switchable (all on by default). With every one off the
 * engine runs the plain protocol: a first try, a queue in Redis, a release that grants and
 * publishes, a claim, renewals one by one, plain shared holds. The switches exist so that a
 * differential test can check that every fast path keeps the plain path's promises, and so
 * that the bench can say what each one earns (docs/ARCHITECTURE.md, "Fast paths"). Not public
 * API.
 * @internal
 */
export interface EnginePolicies {
  /**
   * A freed exclusive key passed to the next caller of this process (in memory, HANDOFF,
   * RELEASE_TO, REFILL). `localHandoffs: 0` bounds the passes; this switches the path off.
   */
  readonly localHandoff: boolean;
  /** A freed permit passed to a permit wait of this process (PASS_SHARE). */
  readonly permitPass: boolean;
  /** Watchdog renewals due together sent as one script call per node (`RenewalBatcher`). */
  readonly renewalBatching: boolean;
  /**
   * The script calls of one tick to a node leave in a few socket writes (`WriteBatching`,
   * `lib/redis/write-batching.ts`); off, each is written on its own.
   */
  readonly writeBatching: boolean;
}

/** Every fast path on: what the library runs. @internal */
export const ALL_POLICIES: EnginePolicies = Object.freeze({
  localHandoff: true,
  permitPass: true,
  renewalBatching: true,
  writeBatching: true,
});

/** Every fast path off: the plain protocol. @internal */
export const NO_POLICIES: EnginePolicies = Object.freeze({
  localHandoff: false,
  permitPass: false,
  renewalBatching: false,
  writeBatching: false,
});

/** The names of the policies, in the order the docs list them. @internal */
export const POLICY_NAMES = Object.keys(ALL_POLICIES) as readonly (keyof EnginePolicies)[];

/**
 * The policies the bench asks for: `NEST_LOCKED_POLICIES_OFF` lists, comma-separated, the fast
 * paths to switch off (`all` for every one), so that one bench run measures a path without it.
 * Unset: every one on. An unknown name is refused, so a typo cannot measure the wrong thing.
 * @internal
 */
export function policiesFromEnv(env: NodeJS.ProcessEnv = process.env): EnginePolicies {
  const off = env.NEST_LOCKED_POLICIES_OFF?.trim();
  if (!off) return ALL_POLICIES;
  if (off === 'all') return NO_POLICIES;
  const policies: Record<keyof EnginePolicies, boolean> = { ...ALL_POLICIES };
  for (const name of off.split(',').map((n) => n.trim())) {
    if (!(POLICY_NAMES as readonly string[]).includes(name)) {
      throw new LockConfigError(UNKNOWN_POLICY(name, POLICY_NAMES), 'NEST_LOCKED_POLICIES_OFF');
    }
    policies[name as keyof EnginePolicies] = false;
  }
  return policies;
}
