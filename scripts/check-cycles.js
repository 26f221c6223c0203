#!/usr/bin/env node
/**
 * Fails when the TypeScript files under a folder (default `lib`) import each other in a cycle,
 * `import type` included: a type-only cycle still ties the files' designs together, and the next
 * value import along it turns into an `undefined` at load time.
 *
 * Usage: node scripts/check-cycles.js [folder]
 *
 * TypeScript's own pre-processor lists the imports (so comments, strings and JSDoc examples are
 * never mistaken for them); only relative specifiers are followed.
 */
const fs = require('node:fs');
const path = require('node:path');
const ts = require('typescript');

const root = path.resolve(process.argv[2] ?? 'lib');

function sources(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sources(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

function resolve(from, specifier) {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(from), specifier);
  const candidates = [base, `${base}.ts`, `${base}.d.ts`, path.join(base, 'index.ts')];
  return candidates.find((c) => c.endsWith('.ts') && fs.existsSync(c));
}

const files = sources(root);
const edges = new Map(
  files.map((file) => {
    const info = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    const targets = info.importedFiles.map((f) => resolve(file, f.fileName)).filter(Boolean);
    return [file, [...new Set(targets)].sort()];
  }),
);

// Depth-first search: an edge back to a file still on the path closes a cycle. Files already
// explored are not entered again, so a tangle of several cycles may show only some of them; the
// check still fails, and fixing those reveals the rest. A cycle is printed from its first file.
const cycles = new Map();
const done = new Set();
function visit(file, trail) {
  const at = trail.indexOf(file);
  if (at !== -1) {
    const cycle = trail.slice(at);
    const first = cycle.indexOf([...cycle].sort()[0]);
    const ordered = [...cycle.slice(first), ...cycle.slice(0, first)];
    cycles.set(ordered.join('>'), ordered);
    return;
  }
  if (done.has(file)) return;
  for (const next of edges.get(file) ?? []) visit(next, [...trail, file]);
  done.add(file);
}
for (const file of [...edges.keys()].sort()) visit(file, []);

const rel = (f) => path.relative(process.cwd(), f) || '.';
if (cycles.size > 0) {
  for (const cycle of cycles.values()) {
    console.error(`Import cycle: ${[...cycle, cycle[0]].map(rel).join(' -> ')}`);
  }
  console.error(
    `${cycles.size} import cycle(s) in ${rel(root)}/. Move the shared type or helper into a ` +
      `file both sides import (as lib/redis/protocol/redis-node.ts does for RedisNode).`,
  );
  process.exit(1);
}
console.log(`No import cycles in ${rel(root)}/ (${files.length} files).`);
