#!/usr/bin/env node
'use strict';
/**
 * `npm run demo`: builds whatever is missing or older than its sources (the library into dist/,
 * then the sample and the scripts into dist-apps/), then runs the compiled demo with the same
 * arguments. The demo itself is scripts/demo.ts.
 */
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const at = (...p) => path.join(root, ...p);

/** mtime of a file, or -1 if it does not exist. */
function mtime(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return -1;
  }
}

/** Newest mtime of the .ts files under `dirs` and of the single `files`. */
function newest(dirs, files) {
  let latest = Math.max(-1, ...files.map(mtime));
  const walk = (dir) => {
    let entries;
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.name.endsWith('.ts')) latest = Math.max(latest, mtime(full));
    }
  };
  dirs.forEach((d) => walk(at(d)));
  return latest;
}

function npmRun(script) {
  process.stdout.write(`demo: npm run ${script} (sources changed or never built)\n`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['run', script], { cwd: root, stdio: 'inherit', shell: false });
  if (r.status !== 0) {
    process.stderr.write(
      `demo: \`npm run ${script}\` failed (${r.error?.message ?? `exit ${r.status}`}).\n`,
    );
    process.exit(r.status || 1);
  }
}

const config = ['tsconfig.json', 'package.json'].map((f) => at(f));
const libOut = Math.min(mtime(at('dist', 'index.js')), mtime(at('dist', 'index.d.ts')));
if (libOut < newest(['lib'], [...config, at('tsconfig.build.json')])) npmRun('build');

const demo = at('dist-apps', 'scripts', 'demo.js');
const appsOut = Math.min(mtime(demo), mtime(at('dist-apps', 'sample', 'main.js')));
const appsIn = Math.max(
  newest(['sample', 'scripts'], [...config, at('tsconfig.apps.json')]),
  mtime(at('dist', 'index.d.ts')),
);
if (appsOut < appsIn) npmRun('build:apps');

// The demo stops what it started on Ctrl-C; wait for it rather than exit under it.
const child = spawn(process.execPath, [demo, ...process.argv.slice(2)], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
