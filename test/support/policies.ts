import { type EnginePolicies, policiesFromEnv } from '../../lib/redis/engine-policies';

/**
 * `it` for a test of one fast path, skipped when `NEST_LOCKED_POLICIES_OFF` switches that path
 * off: the suite then runs on the plain path (`NEST_LOCKED_POLICIES_OFF=all npm test`), where a
 * test of what the path adds (handoffs counted, batched renewals...) has nothing to test.
 */
export function itWith(policy: keyof EnginePolicies): jest.It {
  return policiesFromEnv()[policy] ? it : it.skip;
}

/** `describe` for the tests of one fast path, skipped as `itWith` says. */
export function describeWith(policy: keyof EnginePolicies): jest.Describe {
  return policiesFromEnv()[policy] ? describe : describe.skip;
}
