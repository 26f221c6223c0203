import { LockConfigError } from '../../lib/errors';
import { ALL_POLICIES, NO_POLICIES, policiesFromEnv } from '../../lib/redis/engine-policies';

describe('policiesFromEnv (the bench switch of the fast paths)', () => {
  it('keeps every fast path on when NEST_LOCKED_POLICIES_OFF is unset or empty', () => {
    expect(policiesFromEnv({})).toEqual(ALL_POLICIES);
    expect(policiesFromEnv({ NEST_LOCKED_POLICIES_OFF: ' ' })).toEqual(ALL_POLICIES);
  });

  it('switches off the paths it names, or all of them', () => {
    expect(policiesFromEnv({ NEST_LOCKED_POLICIES_OFF: 'all' })).toEqual(NO_POLICIES);
    expect(policiesFromEnv({ NEST_LOCKED_POLICIES_OFF: 'renewalBatching, permitPass' })).toEqual({
      ...ALL_POLICIES,
      renewalBatching: false,
      permitPass: false,
    });
  });

  it('refuses a name that is no fast path, naming the ones there are', () => {
    const read = () => policiesFromEnv({ NEST_LOCKED_POLICIES_OFF: 'handoff' });
    expect(read).toThrow(LockConfigError);
    expect(read).toThrow(/"handoff".*localHandoff, permitPass/);
  });
});
