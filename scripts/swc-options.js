'use strict';
/**
 * The swc options the tests compile TypeScript with, in jest (jest.config.js) and for the worker
 * processes (scripts/build-for-tests.js): the compiler options of tsconfig.json that change what
 * the code does. Legacy decorators with their metadata (Nest's injection reads
 * `design:paramtypes`), ES2022 class fields (tsc's default for that target), class names kept
 * (messages name classes), CommonJS. Types are not checked here: `npm run lint` does that.
 */
module.exports = {
  jsc: {
    target: 'es2022',
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: true },
    keepClassNames: true,
  },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
};
