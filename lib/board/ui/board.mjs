/* global document, window, location, EventSource, URLSearchParams, fetch, setTimeout, clearTimeout */
// The lock board's page: one EventSource per view, rendered with plain DOM; charts by uPlot.
import uPlot from './uPlot.mjs';
import { mountLockOrderPanel } from './lock-order-panel.mjs';

const view = document.getElementById('view');
const status = document.getElementById('status');
const state = { q: '', group: '', page: 1, events: 'problems' };
let source;
let charts = [];
let last;

// ---- formatting -------------------------------------------------------------------------------

const esc = (value) => String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function ms(value) {
  if (value === null || value === undefined) return '—';
  const v = Math.max(0, value);
  if (v < 1000) return `${Math.round(v)} ms`;
  if (v < 60_000) return `${(v / 1000).toFixed(1)} s`;
  if (v < 3_600_000) return `${Math.floor(v / 60_000)} min ${Math.round((v % 60_000) / 1000)} s`;
  return `${(v / 3_600_000).toFixed(1)} h`;
}
const pct = (v) => (v === null || v === undefined ? '—' : `${(v * 100).toFixed(1)} %`);
const num = (v) => (v === null || v === undefined ? '—' : String(v));
const time = (t) => new Date(t).toLocaleTimeString();
const keyHref = (group, key) => `#/key/${encodeURIComponent(group)}/${encodeURIComponent(key)}`;
const keyLink = (group, key) => `<a href="${esc(keyHref(group, key))}">${esc(key)}</a>`;
const tag = (text, kind = text) => `<span class="tag t-${esc(kind)}">${esc(text)}</span>`;

function table(caption, head, rows, empty) {
  if (rows.length === 0) return `<p class="empty">${esc(empty)}</p>`;
  const th = head
    .map(
      (h) =>
        `<th scope="col"${h.endsWith('#') ? ' class="num"' : ''}>${esc(h.replace(/#$/, ''))}</th>`,
    )
    .join('');
  return `<table><caption>${esc(caption)}</caption><thead><tr>${th}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.join('')}</tr>`)
    .join('')}</tbody></table>`;
}
const td = (html, cls = '') => `<td${cls ? ` class="${cls}"` : ''}>${html}</td>`;

// ---- routing and the live stream --------------------------------------------------------------

function route() {
  const m = /^#\/key\/([^/]*)\/(.*)$/.exec(location.hash);
  return m
    ? { view: 'key', group: decodeURIComponent(m[1]), key: decodeURIComponent(m[2]) }
    : { view: 'overview' };
}

function connect() {
  source?.close();
  const r = route();
  const params = new URLSearchParams(
    r.view === 'key'
      ? { view: 'key', group: r.group, key: r.key }
      : {
          view: 'overview',
          q: state.q,
          group: state.group,
          page: String(state.page),
          events: state.events,
        },
  );
  source = new EventSource(`api/stream?${params}`);
  source.onopen = () => (status.textContent = 'Live');
  source.onmessage = (e) => {
    last = JSON.parse(e.data);
    status.textContent = `Live · updated ${time(last.now)}`;
    if (r.view === 'key') renderKey(last);
    else renderOverview(last);
  };
  source.addEventListener(
    'failure',
    (e) => (status.textContent = `Error: ${JSON.parse(e.data).message}`),
  );
  source.onerror = () => (status.textContent = 'Reconnecting…');
}

function show() {
  charts.forEach((c) => c.destroy());
  charts = [];
  last = undefined;
  const r = route();
  if (r.view === 'key') skeletonKey(r);
  else skeletonOverview();
  connect();
}

window.addEventListener('hashchange', () => {
  show();
  document.getElementById('main').focus();
});

// ---- charts -----------------------------------------------------------------------------------

/**
 * The time axis: the charts cover 5 minutes, so the time of day (seconds when ticks are less
 * than a minute apart), never the date uPlot adds at its first tick; and room for "12:34:56 PM"
 * between ticks, so no two labels touch.
 */
const timeAxis = {
  space: 90,
  values: (_u, splits, _axis, _space, incr) =>
    splits.map((t) =>
      new Date(t * 1000).toLocaleTimeString([], {
        hour: '2-digit',
        minute: '2-digit',
        ...(incr < 60 && { second: '2-digit' }),
      }),
    ),
};

/** Dots on series with gaps: a step between two idle ones has no line to show it. */
const points = { show: true, size: 5 };

function makeCharts(host) {
  const width = Math.max(300, Math.floor(host.clientWidth / (host.clientWidth > 700 ? 2 : 1)) - 12);
  const base = { width, height: 170, legend: { live: false } };
  const rate = new uPlot(
    {
      ...base,
      title: 'Acquires/s and busy rate',
      scales: { pct: { range: [0, 100] } },
      series: [
        {},
        // A step without data is 0 acquires/s (the data says so) and a gap of busy % (null):
        // never a line drawn across it.
        { label: 'acquires/s', stroke: '#0b5cad', width: 2, spanGaps: false },
        { label: 'busy %', stroke: '#a3161b', width: 2, scale: 'pct', spanGaps: false, points },
      ],
      axes: [timeAxis, { size: 64 }, { scale: 'pct', side: 1, grid: { show: false } }],
    },
    [[], [], []],
    host.querySelector('.c-rate'),
  );
  const wait = new uPlot(
    {
      ...base,
      title: 'Wait p50 / p99 (ms)',
      series: [
        {},
        { label: 'p50 ms', stroke: '#1d6b2f', width: 2, spanGaps: false, points },
        { label: 'p99 ms', stroke: '#7a4b00', width: 2, spanGaps: false, points },
      ],
      // Room for "10,000" on the axis.
      axes: [timeAxis, { size: 64 }],
    },
    [[], [], []],
    host.querySelector('.c-wait'),
  );
  charts = [rate, wait];
}

function updateCharts(series, summary) {
  if (charts.length !== 2) return;
  charts[0].setData([
    series.t,
    series.acquiresPerSec,
    series.busyRate.map((v) => (v === null ? null : v * 100)),
  ]);
  charts[1].setData([series.t, series.p50, series.p99]);
  const i = series.t.length - 1;
  summary.textContent =
    i < 0
      ? 'No lock activity in the last 5 minutes.'
      : `Latest 5 s: ${series.acquiresPerSec[i]} acquires/s, busy ${pct(series.busyRate[i])}, ` +
        `wait p50 ${ms(series.p50[i])}, p99 ${ms(series.p99[i])}.`;
}

const chartBlock = () =>
  `<p class="chart-summary" aria-live="off"></p><div class="charts"><div class="c-rate"></div><div class="c-wait"></div></div>`;

// ---- overview ---------------------------------------------------------------------------------

function skeletonOverview() {
  document.title = 'Locks · nest-locked';
  view.innerHTML = `
  <div class="grid">
    <section class="panel wide" aria-labelledby="h-held">
      <h2 id="h-held">Held locks</h2>
      <div class="tools" role="search">
        <label for="q">Search keys</label>
        <input type="search" id="q" placeholder="product:" value="${esc(state.q)}" />
        <label for="grp">Group</label>
        <select id="grp"><option value="">all</option></select>
      </div>
      <div id="held"></div>
      <p class="muted">Fence, held for and renewals come from the holder's instance: “—” until it has published them (every 250 ms while a page is open).</p>
      <p class="muted" id="legend"></p>
      <nav class="pager" id="pager" aria-label="Pages of held locks"></nav>
    </section>
    <section class="panel" aria-labelledby="h-lines"><h2 id="h-lines">Waiting lines</h2><div id="lines"></div></section>
    <section class="panel" aria-labelledby="h-events">
      <h2 id="h-events">Recent events</h2>
      <div class="tools"><label for="etype">Show</label>
        <select id="etype"><option value="problems">lost, expired, errors, forced</option><option value="all">all, with busy</option><option>lost</option><option>expired</option><option>busy</option><option>error</option><option>forced</option></select>
      </div>
      <div id="events"></div>
    </section>
    <section class="panel wide" aria-labelledby="h-hot" id="hot"><h2 id="h-hot">Hot keys (last 5 minutes)</h2>${chartBlock()}<div id="hotkeys"></div></section>
    <section class="panel" aria-labelledby="h-inst"><h2 id="h-inst">Instances</h2><div id="instances"></div></section>
    <section class="panel" aria-labelledby="h-nodes"><h2 id="h-nodes">Nodes</h2><div id="nodes"></div></section>
    <section class="panel wide" id="lock-order"></section>
  </div>`;
  mountLockOrderPanel(document.getElementById('lock-order'));
  let typing;
  document.getElementById('q').addEventListener('input', (e) => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      state.q = e.target.value;
      state.page = 1;
      connect();
    }, 250);
  });
  document.getElementById('grp').addEventListener('change', (e) => {
    state.group = e.target.value;
    state.page = 1;
    connect();
  });
  document.getElementById('etype').value = state.events;
  document.getElementById('etype').addEventListener('change', (e) => {
    state.events = e.target.value;
    connect();
  });
  makeCharts(document.getElementById('hot'));
}

function heldRows(rows, withKey = true) {
  return rows.map((r) => [
    ...(withKey ? [td(keyLink(r.group, r.key), 'key')] : []),
    td(esc(r.mode) + (r.holders > 1 ? ` <span class="muted">(${r.holders})</span>` : '')),
    td(esc(r.instance ?? '—')),
    td(num(r.fence), 'num'),
    td(ms(r.heldMs), 'num'),
    td(ms(r.leaseLeftMs), 'num'),
    td(num(r.renewals), 'num'),
    td(`<span class="muted">${esc(r.token ?? '')}</span>`),
    td(esc(r.group)),
  ]);
}
const HELD_HEAD = [
  'Mode',
  'Holder instance',
  'Fence#',
  'Held for#',
  'Lease left#',
  'Renewals#',
  'Token',
  'Group',
];

/** "3 waiting", or "at least 3 waiting" when the board cannot see every waiter. */
const waitingCount = (line) => `${line.complete ? '' : 'at least '}${line.length} waiting`;

function waiterHtml(w) {
  return (
    `<li><strong>${esc(w.instance ?? 'unknown instance')}</strong> · ${esc(w.mode)} · waited ${ms(w.waitedMs)}` +
    ` · ${w.deadlineInMs === null ? 'no deadline known' : w.deadlineInMs >= 0 ? `gives up in ${ms(w.deadlineInMs)}` : 'past its deadline'}` +
    ` <span class="muted">${esc(w.token ?? '')}</span></li>`
  );
}

function lineHtml(line, withKey = true) {
  const inLine = line.waiters.filter((w) => !w.inProcess);
  const inProcess = line.waiters.filter((w) => w.inProcess);
  const more =
    line.length > line.waiters.length
      ? `<p class="muted">and ${line.complete ? '' : 'at least '}${line.length - line.waiters.length} more</p>`
      : '';
  const title = withKey
    ? `<h3>${keyLink(line.group, line.key)} <span class="muted">${waitingCount(line)} · ${esc(line.group)}</span></h3>`
    : `<p>${waitingCount(line)}</p>`;
  const ordered = inLine.length
    ? `<ol class="line" aria-label="Waiting for ${esc(line.key)}, first in line first">${inLine.map(waiterHtml).join('')}</ol>`
    : '';
  // On one Redis node a process queues one caller per key: the others wait behind it (or behind
  // its own hold) inside the process.
  const behind = inProcess.length
    ? `<p class="muted">Waiting inside their process, behind its caller in line or its hold:</p>` +
      `<ul class="line in-process">${inProcess.map(waiterHtml).join('')}</ul>`
    : '';
  return `${title}${ordered}${behind}${more}`;
}

/** What an empty list of events says, by what it lists. */
const NO_EVENTS = {
  problems: 'No lost, expired, error or forced events.',
  all: 'No events yet.',
  busy: 'No busy answers.',
};
const noEvents = (filter) => NO_EVENTS[filter] ?? `No ${filter} events.`;

function renderEvents(events, host, empty) {
  const html = table(
    'Newest first',
    ['Time', 'Event', 'Instance', 'Key', 'Detail'],
    events.map((e) => [
      td(esc(time(e.t))),
      td(tag(e.type)),
      td(esc(e.instance)),
      td(keyLink(e.group, e.key), 'key'),
      td(esc(e.detail ?? '')),
    ]),
    empty,
  );
  if (host.dataset.html !== html) {
    host.innerHTML = html;
    host.dataset.html = html;
  }
}

function patch(id, html) {
  const host = document.getElementById(id);
  if (host && host.dataset.html !== html) {
    host.innerHTML = html;
    host.dataset.html = html;
  }
}

function renderOverview(d) {
  const grp = document.getElementById('grp');
  if (grp && grp.options.length !== d.groups.length + 1) {
    grp.innerHTML = `<option value="">all</option>${d.groups
      .map((g) => `<option value="${esc(g.name)}">${esc(g.name)} (${esc(g.backend)})</option>`)
      .join('')}`;
    grp.value = state.group;
  }
  const h = d.held;
  patch(
    'held',
    table(
      `${h.total}${h.complete ? '' : '+'} held${state.q ? ` matching “${state.q}”` : ''}; page ${h.page} of ${h.pages}`,
      ['Key', ...HELD_HEAD],
      heldRows(h.rows),
      state.q ? 'No held key matches.' : 'Nothing is held right now.',
    ),
  );
  // What a backend's server cannot tell (a column's "—"), and why.
  patch(
    'legend',
    (d.legends ?? []).map((l) => `Group ${esc(l.group)}: ${esc(l.text)}`).join('<br />'),
  );
  patch(
    'pager',
    h.pages > 1
      ? `<button type="button" data-page="${h.page - 1}" ${h.page <= 1 ? 'disabled' : ''}>Previous</button>` +
          `<span>Page ${h.page} of ${h.pages}</span>` +
          `<button type="button" data-page="${h.page + 1}" ${h.page >= h.pages ? 'disabled' : ''}>Next</button>`
      : '',
  );
  patch(
    'lines',
    d.lines.length
      ? d.lines.map((l) => lineHtml(l)).join('')
      : '<p class="empty">Nobody waits.</p>',
  );
  renderEvents(d.events, document.getElementById('events'), noEvents(state.events));
  updateCharts(d.hot.series, document.querySelector('#hot .chart-summary'));
  patch(
    'hotkeys',
    table(
      'Busiest keys over the window',
      ['Key', 'Acquires/s#', 'Busy rate#', 'Wait p50#', 'Wait p99#', 'Group'],
      d.hot.keys.map((k) => [
        td(keyLink(k.group, k.key), 'key'),
        td(num(k.acquiresPerSec), 'num'),
        td(pct(k.busyRate), 'num'),
        td(ms(k.p50), 'num'),
        td(ms(k.p99), 'num'),
        td(esc(k.group)),
      ]),
      'No lock activity in the last 5 minutes.',
    ),
  );
  patch(
    'instances',
    table(
      'Instances publishing now',
      ['Instance', 'Host', 'PID#', 'Groups', 'Seen#'],
      d.instances.map((i) => [
        td(esc(i.name) + (i.self ? ' <span class="muted">(this page)</span>' : '')),
        td(esc(i.host)),
        td(num(i.pid), 'num'),
        td(esc(i.groups.join(', '))),
        td(`${ms(i.seenMs)} ago`, 'num'),
      ]),
      'No instance publishes.',
    ),
  );
  patch(
    'nodes',
    table(
      'Lock servers of every group',
      ['Group', 'Node', 'Status', 'Latency#', 'Role', 'Warning'],
      d.nodes.map((n) => [
        td(`${esc(n.group)} <span class="muted">${esc(n.backend)}</span>`),
        td(esc(n.node)),
        td(tag(n.status)),
        td(n.latencyMs === undefined ? '—' : `${n.latencyMs} ms`, 'num'),
        td(esc(n.role ?? '—')),
        td(n.warning ? tag(n.warning, 'warn') : esc(n.error ?? '')),
      ]),
      'No nodes.',
    ),
  );
}

view.addEventListener('click', (e) => {
  const page = e.target.closest?.('button[data-page]');
  if (page) {
    state.page = Number(page.dataset.page);
    connect();
  }
});

// ---- one key ----------------------------------------------------------------------------------

function skeletonKey(r) {
  document.title = `${r.key} · Locks`;
  view.innerHTML = `
  <p><a href="#/">← All locks</a></p>
  <h2 class="key-title">${esc(r.key)} <span class="muted">group ${esc(r.group)}</span></h2>
  <div class="grid">
    <section class="panel wide" aria-labelledby="h-kheld"><h2 id="h-kheld">Held</h2><div id="kheld"></div><div id="kaction"></div></section>
    <section class="panel" aria-labelledby="h-kline"><h2 id="h-kline">Waiting line</h2><div id="kline"></div></section>
    <section class="panel" aria-labelledby="h-kevents"><h2 id="h-kevents">Events of this key</h2><div id="kevents"></div><h3>Last busy answers</h3><div id="kbusy"></div></section>
    <section class="panel wide" aria-labelledby="h-khot" id="hot"><h2 id="h-khot">Activity (last 5 minutes)</h2>${chartBlock()}</section>
  </div>`;
  makeCharts(document.getElementById('hot'));
}

function renderKey(d) {
  patch('kheld', table(`${d.key}`, HELD_HEAD, heldRows(d.held, false), 'Not held right now.'));
  const canRelease = d.actions && d.held.some((h) => h.mode === 'exclusive');
  patch(
    'kaction',
    canRelease
      ? `<p><button type="button" class="danger" id="release">Force release…</button> <span class="muted">The holder's watchdog finds its lease lost; recorded as an event.</span></p>`
      : '',
  );
  patch(
    'kline',
    d.line && d.line.waiters.length
      ? lineHtml(d.line, false)
      : '<p class="empty">Nobody waits.</p>',
  );
  // Its busy answers are listed apart, below: "no events" above them would say otherwise.
  renderEvents(
    d.events,
    document.getElementById('kevents'),
    d.busy.length
      ? 'No lost, expired, error or forced events of this key; its busy answers are below.'
      : 'No events of this key yet.',
  );
  renderEvents(d.busy, document.getElementById('kbusy'), noEvents('busy'));
  updateCharts(d.series, document.querySelector('#hot .chart-summary'));
}

view.addEventListener('click', async (e) => {
  if (!e.target.closest?.('#release') || !last) return;
  const typed = window.prompt(
    `Force release "${last.key}"? Its holder loses the lock. Type the key to confirm.`,
  );
  if (typed === null) return;
  const params = new URLSearchParams({ group: last.group, key: last.key, confirm: typed });
  const res = await fetch(`api/release?${params}`, {
    method: 'POST',
    headers: { 'x-lock-board': 'release' },
  });
  const body = await res.json();
  status.textContent = res.ok
    ? `Released ${last.key}.`
    : `Not released: ${body.reason ?? body.message}`;
});

show();
