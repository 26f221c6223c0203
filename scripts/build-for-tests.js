#!/usr/bin/env node
'use strict';
/**
 * `npm test`'s pretest: compiles, with swc and without type-checking, only what the tests run
 * outside jest: the library into dist/ (the worker processes and the sample load it as
 * `nest-locked`), the sample app and the test fixtures into dist-apps/ (spawned as OS
 * processes). Other files under lib/ (such as .lua) are copied beside the compiled ones. The
 * package itself is built by `npm run build` (tsc, with declarations); `npm run lint` checks the
 * types.
 */
const fs = require('node:fs');
const path = require('node:path');
const { transformFileSync } = require('@swc/core');
const options = require('./swc-options');

const root = path.resolve(__dirname, '..');

/** Every file under `dir`, relative to it. */
function filesUnder(dir) {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

/** Compiles each .ts file of `from` (specs excepted) into `to`, and copies the other files. */
function build(from, to) {
  for (const file of filesUnder(path.join(root, from))) {
    const source = path.join(root, from, file);
    if (file.endsWith('.spec.ts') || file.endsWith('.d.ts')) continue;
    const isTs = file.endsWith('.ts');
    const target = path.join(root, to, isTs ? file.replace(/\.ts$/, '.js') : file);
    if (isTs) compile(source, target);
    else {
      fs.mkdirSync(path.dirname(target), { recursive: true });
      fs.copyFileSync(source, target);
    }
  }
}

/** Compiles the one .ts file `source` into the .js file `target`. */
function compile(source, target) {
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.writeFileSync(target, transformFileSync(source, { ...options, swcrc: false }).code);
}

fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
fs.rmSync(path.join(root, 'dist-apps'), { recursive: true, force: true });
build('lib', 'dist');
build('sample', 'dist-apps/sample');
build('test/fixtures', 'dist-apps/test/fixtures');
// The seeded generator the policy worker shares with the benchmark (its only import from bench/).
compile(path.join(root, 'bench/seeded.ts'), path.join(root, 'dist-apps/bench/seeded.js'));
// The lock board's page and its vendored chart library (the board's browser test serves them).
require('./copy-board-ui');
