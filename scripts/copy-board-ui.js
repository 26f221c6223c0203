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
for (const file of ['uPlot.esm.js', 'uPlot.min.css', 'LICENSE']) {
  fs.copyFileSync(
    path.join(uplot, file === 'LICENSE' ? '' : 'dist', file),
    path.join(out, file === 'LICENSE' ? 'uPlot.LICENSE' : file),
  );
}
