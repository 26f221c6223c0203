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
  // The specs mostly wait (on servers, timers, worker processes): one file at a time keeps a
  // 2-vCPU machine a third busy. Three at once fill it without starving the timing-sensitive
  // specs of CPU (four made them miss their bounds on a loaded machine).
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
