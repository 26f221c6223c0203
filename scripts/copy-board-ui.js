// Copies the lock board's page into dist/board/ui, with the chart library (uPlot) vendored from
// node_modules: the published package serves it without depending on uplot at runtime.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const out = path.join(root, 'dist', 'board', 'ui');
fs.mkdirSync(out, { recursive: true });
const ui = path.join(root, 'lib', 'board', 'ui');
for (const file of fs.readdirSync(ui)) fs.copyFileSync(path.join(ui, file), path.join(out, file));
const uplot = path.dirname(require.resolve('uplot/package.json'));
// Source in uplot -> name in dist/board/ui (scripts are .mjs: see ASSETS in board-http.ts).
const vendored = {
  'dist/uPlot.esm.js': 'uPlot.mjs',
  'dist/uPlot.min.css': 'uPlot.min.css',
  LICENSE: 'uPlot.LICENSE',
};
for (const [from, to] of Object.entries(vendored)) {
  fs.copyFileSync(path.join(uplot, from), path.join(out, to));
}
