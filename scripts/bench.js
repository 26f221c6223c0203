#!/usr/bin/env node
// `npm run bench`: builds what is missing or stale, then runs the benchmark orchestrator
// (dist-apps/bench/run.js) with the arguments passed through.
//   --rebuild   build even if everything looks fresh
//   --no-build  never build (use dist/ and dist-apps/ as they are)
'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const argv = process.argv.slice(2);
const force = argv.includes('--rebuild');
const never = argv.includes('--no-build');
const passThrough = argv.filter((a) => a !== '--rebuild' && a !== '--no-build');

/** Newest mtime of the .ts files under `dir` (0 if none). */
function newestTs(dir) {
  let newest = 0;
  const walk = (d) => {
    let entries;
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
    }
  };
  walk(path.join(root, dir));
  return newest;
}

function mtime(file) {
  try {
    return fs.statSync(path.join(root, file)).mtimeMs;
  } catch {
    return 0;
  }
}

function npm(script) {
  console.log(`> npm run ${script}`);
  const r = spawnSync('npm', ['run', '--silent', script], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`npm run ${script} failed (exit ${r.status ?? r.signal})`);
    process.exit(r.status || 1);
  }
}

if (!never) {
  const libStale = force || mtime('dist/index.js') < newestTs('lib');
  if (libStale) npm('build');
  const appsStale =
    force ||
    libStale ||
    mtime('dist-apps/bench/run.js') < Math.max(newestTs('bench'), mtime('dist/index.d.ts'));
  if (appsStale) npm('build:apps');
}

const run = spawnSync(
  process.execPath,
  [path.join(root, 'dist-apps/bench/run.js'), ...passThrough],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
process.exit(run.status ?? 1);
