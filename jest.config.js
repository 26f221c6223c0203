// TypeScript is compiled by swc, without type-checking (`npm run lint` checks the types once
// for the whole tree); scripts/swc-options.js says which tsconfig options it keeps.
const swc = ['@swc/jest', require('./scripts/swc-options')];

/** @type {import('jest').Config} */
const common = {
  testEnvironment: 'node',
  rootDir: __dirname,
  moduleNameMapper: {
    '^nest-locked$': '<rootDir>/lib/index.ts',
    '^nest-locked/(testing|health|postgres|mysql|etcd|zookeeper|board)$':
      '<rootDir>/lib/$1/index.ts',
  },
  transform: { '^.+\\.ts$': swc },
};

module.exports = {
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // The specs mostly wait (on servers, timers, worker processes): the run takes the sum of the
  // files' times over the workers (652 s / 3 = 218 s here on 2 vCPUs). Four took 180-184 s, but
  // the files ran 11% slower and a timing-bound case failed in 1 of 7 runs: three keep the
  // suite green on a fresh machine (docs/developing.md has the measurements).
  maxWorkers: 3,
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.spec.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.spec.ts'],
    },
    { ...common, displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'] },
    // Real redis-server processes and OS workers, broken on purpose (kills, stalls, restarts,
    // failovers); every wait bounded. `npm run test:faults` runs this project alone.
    { ...common, displayName: 'faults', testMatch: ['<rootDir>/test/faults/**/*.spec.ts'] },
  ],
};
