/* global document, fetch, setTimeout */
// The board's "Lock order" panel: the lock-order graph of the instance serving the page (classes
// as nodes, "held -> asked for" edges with their first site), cycles in red. Read from
// api/lock-order every 5 s while the panel is on the page.

const REFRESH_MS = 5_000;
const SVG_NS = 'http://www.w3.org/2000/svg';
const esc = (value) => String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Classes on a circle; each edge a line with an arrowhead, red when a cycle runs through it. */
function graphSvg(classes, edges) {
  const w = 640;
  const h = Math.max(320, 120 + classes.length * 30);
  const r = Math.min(w, h) / 2 - 45;
  const at = new Map(
    classes.map((c, i) => {
      const a = (2 * Math.PI * i) / classes.length - Math.PI / 2;
      return [c, { x: w / 2 + r * Math.cos(a), y: h / 2 + r * Math.sin(a) }];
    }),
  );
  const lines = edges.map((e) => {
    const from = at.get(e.from);
    const to = at.get(e.to);
    const colour = e.inCycle ? 'var(--bad, #c0392b)' : 'currentColor';
    const marker = e.inCycle ? 'url(#lo-arrow-bad)' : 'url(#lo-arrow)';
    const title = `<title>${esc(`${e.from} -> ${e.to}, first at ${e.site} on ${e.instance}`)}</title>`;
    if (e.from === e.to) {
      // A class nested in itself: a loop above its node.
      return `<path d="M ${from.x - 8} ${from.y - 8} c -30 -40 46 -40 16 0" fill="none" stroke="${colour}" stroke-width="2" marker-end="${marker}">${title}</path>`;
    }
    // Stop short of the node so the arrowhead shows; bend a little so A->B and B->A both show.
    const dx = to.x - from.x;
    const dy = to.y - from.y;
    const len = Math.hypot(dx, dy) || 1;
    const ex = to.x - (dx / len) * 14;
    const ey = to.y - (dy / len) * 14;
    const mx = (from.x + ex) / 2 - (dy / len) * 18;
    const my = (from.y + ey) / 2 + (dx / len) * 18;
    return `<path d="M ${from.x} ${from.y} Q ${mx} ${my} ${ex} ${ey}" fill="none" stroke="${colour}" stroke-width="${e.inCycle ? 2.5 : 1.5}" marker-end="${marker}">${title}</path>`;
  });
  const nodes = classes.map((c) => {
    const p = at.get(c);
    const anchor = p.x < w / 2 - 5 ? 'end' : p.x > w / 2 + 5 ? 'start' : 'middle';
    const dx = anchor === 'end' ? -12 : anchor === 'start' ? 12 : 0;
    return `<circle cx="${p.x}" cy="${p.y}" r="7" fill="currentColor"/><text x="${p.x + dx}" y="${p.y - 10}" text-anchor="${anchor}" font-size="12">${esc(c)}</text>`;
  });
  const arrow = (id, colour) =>
    `<marker id="${id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="${colour}"/></marker>`;
  return `<svg xmlns="${SVG_NS}" viewBox="0 0 ${w} ${h}" role="img" aria-label="Lock-order graph: ${classes.length} classes, ${edges.length} edges" style="width:100%;max-width:${w}px;height:auto"><defs>${arrow('lo-arrow', 'currentColor')}${arrow('lo-arrow-bad', 'var(--bad, #c0392b)')}</defs>${lines.join('')}${nodes.join('')}</svg>`;
}

function render(el, d) {
  if (d.off) {
    el.querySelector('.lo-body').innerHTML =
      `<p class="empty">Lock-order checking is off (<code>lockOrder: 'off'</code>).</p>`;
    return;
  }
  const cycles = d.cycles.length
    ? `<p class="lo-cycles" style="color:var(--bad, #c0392b)">${d.cycles.length} cycle(s): ${d.cycles
        .map((c) =>
          esc(
            c
              .map((e) => e.from)
              .concat(c[0].from)
              .join(' -> '),
          ),
        )
        .join('; ')}</p>`
    : `<p class="muted">No cycle.</p>`;
  const rows = d.edges
    .map(
      (e) =>
        `<tr${e.inCycle ? ' class="lo-bad" style="color:var(--bad, #c0392b)"' : ''}><td>${esc(e.from)}</td><td>${esc(e.to)}</td><td>${esc(e.site)}</td><td>${esc(e.instance)}</td></tr>`,
    )
    .join('');
  el.querySelector('.lo-body').innerHTML = d.edges.length
    ? `${cycles}${graphSvg(d.classes, d.edges)}<table><caption>Edges: held -> asked for, where first seen</caption><thead><tr><th scope="col">held</th><th scope="col">asked for</th><th scope="col">first at</th><th scope="col">instance</th></tr></thead><tbody>${rows}</tbody></table>`
    : `<p class="empty">No nested locks seen yet.</p>`;
}

/** Fills `el` (a section of the overview) and keeps it current while it is on the page. */
export function mountLockOrderPanel(el) {
  el.innerHTML = `<h2 id="h-lock-order">Lock order</h2><div class="lo-body"><p class="muted">Loading…</p></div>`;
  el.setAttribute('aria-labelledby', 'h-lock-order');
  const refresh = async () => {
    if (!document.body.contains(el)) return;
    try {
      const res = await fetch('api/lock-order', { cache: 'no-store' });
      if (res.ok) render(el, await res.json());
    } catch {
      // The next refresh tries again.
    }
    setTimeout(refresh, REFRESH_MS);
  };
  void refresh();
}
