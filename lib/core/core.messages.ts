/**
 * The messages of the neutral core (`core/`). The backends and `api/reentry.ts` word a mismatch
 * of shared holds with them too.
 */

export const PERMITS_MISMATCH = (key: string, asked: number, held: number) =>
  `Lock "${key}" asked with permits: ${asked}, but its current holders use permits: ${held}. ` +
  `Every holder of a key must use the same number of permits.`;

export const MODE_MISMATCH = (key: string, asked: string, held: string) =>
  `Lock "${key}" asked as ${asked}, but its current holders hold it as ${held}.`;

/** Why a wait ends when the application shuts down. */
export const SHUTTING_DOWN = 'the application is shutting down';

/** Engine policies: the bench switch of the fast paths (`engine-policies.ts`). */
export const UNKNOWN_POLICY = (name: string, known: readonly string[]) =>
  `NEST_LOCKED_POLICIES_OFF names "${name}", which is no fast path: ` +
  `use "all" or some of ${known.join(', ')}, comma-separated.`;
