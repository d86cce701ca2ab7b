// mixzero serve: the page's code. MIT, like the rest of mixzero.
// The piece drawings below are the project's own (MIT too).
// The server referees: this page only draws what it is told and sends the
// clicks; every move it sends is checked by the engine on the server.
'use strict';

const FILES = 'abcdefghik'; // ten files, no j
const SVGNS = 'http://www.w3.org/2000/svg';

const squareName = (i) => FILES[i % 10] + (Math.floor(i / 10) + 1);
function squareIndex(name) {
  const file = FILES.indexOf(name[0]);
  const rank = parseInt(name.slice(1), 10) - 1;
  return file < 0 || !(rank >= 0 && rank < 10) ? -1 : rank * 10 + file;
}
// "e2e5" -> [from, to, promotion]; squares may have two-digit ranks.
function splitMove(uci) {
  const m = /^([a-k])(\d+)([a-k])(\d+)([qrbn]?)$/.exec(uci);
  return m ? [squareIndex(m[1] + m[2]), squareIndex(m[3] + m[4]), m[5]] : null;
}
// The piece placement of a FEN: 100 entries, rank 1 first.
function parseFen(fen) {
  const board = new Array(100).fill(null);
  const rows = fen.split(' ')[0].split('/');
  rows.forEach((row, r) => {
    const rank = 9 - r;
    let file = 0;
    for (let i = 0; i < row.length; i++) {
      const c = row[i];
      if (c >= '0' && c <= '9') {
        let n = c;
        if (row[i + 1] >= '0' && row[i + 1] <= '9') n += row[++i];
        file += parseInt(n, 10);
      } else {
        if (file < 10 && rank >= 0) board[rank * 10 + file] = c;
        file++;
      }
    }
  });
  return board;
}
const isWhite = (p) => p === p.toUpperCase();
const el = (id) => document.getElementById(id);
function svg(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}
function html(tag, attrs, text, parent) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

// ---- Pieces: simple silhouettes on a 100 x 100 grid. ----
const BASE = 'M22 92 L78 92 L78 82 L22 82 Z';
const PIECES = {
  p: ['M50 16 A13 13 0 1 1 49.9 16 Z', 'M36 82 Q38 58 44 46 L56 46 Q62 58 64 82 Z', BASE],
  r: ['M26 40 L26 18 L37 18 L37 27 L45 27 L45 18 L55 18 L55 27 L63 27 L63 18 L74 18 L74 40 Z',
      'M32 40 L68 40 L70 82 L30 82 Z', BASE],
  n: ['M30 82 Q30 66 44 56 L40 52 Q32 60 24 58 Q18 54 22 46 L38 26 L40 14 L48 22 Q64 22 72 40 Q80 62 74 82 Z',
      'M40 34 A3 3 0 1 1 39.9 34 Z', BASE],
  b: ['M50 8 A6 6 0 1 1 49.9 8 Z', 'M50 16 Q72 40 62 62 L38 62 Q28 40 50 16 Z',
      'M38 62 L62 62 L66 82 L34 82 Z', 'M46 30 L56 40', BASE],
  q: ['M24 76 L16 30 L36 52 L42 20 L50 50 L58 20 L64 52 L84 30 L76 76 Z',
      'M16 24 A5 5 0 1 1 15.9 24 Z', 'M42 14 A5 5 0 1 1 41.9 14 Z', 'M58 14 A5 5 0 1 1 57.9 14 Z',
      'M84 24 A5 5 0 1 1 83.9 24 Z', 'M26 76 L74 76 L76 82 L24 82 Z', BASE],
  k: ['M46 6 L54 6 L54 14 L62 14 L62 22 L54 22 L54 32 L46 32 L46 22 L38 22 L38 14 L46 14 Z',
      'M28 80 Q16 50 36 40 Q50 34 64 40 Q84 50 72 80 Z', BASE],
};
function drawPiece(parent, piece, x, y) {
  const white = isWhite(piece);
  const g = svg('g', {
    transform: `translate(${x} ${y}) scale(0.01)`,
    class: 'piece',
    'data-piece': piece,
    'pointer-events': 'none',
  }, parent);
  for (const d of PIECES[piece.toLowerCase()]) {
    svg('path', {
      d,
      fill: white ? '#fdfdfb' : '#262626',
      stroke: white ? '#222' : '#ddd',
      'stroke-width': 4,
      'stroke-linejoin': 'round',
    }, g);
  }
  return g;
}

// ---- The board: 10 x 10 squares, coordinates, marks, arrows. ----
class Board {
  constructor(container, onMove) {
    this.container = container;
    this.onMove = onMove; // (from, to) or null for a board that only shows
    this.flipped = false;
    this.view = { fen: '10/10/10/10/10/10/10/10/10/10 w - - 0 1', legal: [], movable: false };
    this.selected = -1;
    this.drag = null;
    this.svg = svg('svg', { viewBox: '-0.6 -0.05 10.65 10.65' }, container);
    this.svg.addEventListener('pointerdown', (e) => this.down(e));
    this.svg.addEventListener('pointermove', (e) => this.moveDrag(e));
    this.svg.addEventListener('pointerup', (e) => this.up(e));
    this.draw();
  }
  xy(i) {
    const file = i % 10, rank = Math.floor(i / 10);
    return this.flipped ? [9 - file, rank] : [file, 9 - rank];
  }
  squareAt(e) {
    const pt = this.svg.createSVGPoint();
    pt.x = e.clientX; pt.y = e.clientY;
    const p = pt.matrixTransform(this.svg.getScreenCTM().inverse());
    const x = Math.floor(p.x), y = Math.floor(p.y);
    if (x < 0 || x > 9 || y < 0 || y > 9) return -1;
    return this.flipped ? y * 10 + (9 - x) : (9 - y) * 10 + x;
  }
  show(view) {
    this.view = view;
    this.selected = -1;
    this.draw();
  }
  targets(from) {
    return this.view.legal.filter((m) => splitMove(m.uci)[0] === from);
  }
  draw() {
    const s = this.svg;
    while (s.firstChild) s.removeChild(s.firstChild);
    const board = parseFen(this.view.fen);
    const last = this.view.lastMove ? splitMove(this.view.lastMove) : null;
    const squares = svg('g', {}, s);
    for (let i = 0; i < 100; i++) {
      const [x, y] = this.xy(i);
      const dark = (i % 10 + Math.floor(i / 10)) % 2 === 0;
      let fill = dark ? '#b58863' : '#eed9b6';
      if (last && (i === last[0] || i === last[1])) fill = dark ? '#aaa23a' : '#cdd26a';
      if (i === this.selected) fill = '#7fa650';
      svg('rect', { x, y, width: 1, height: 1, fill, 'data-square': squareName(i) }, squares);
    }
    for (let i = 0; i < 10; i++) {
      const [fx] = this.xy(i), [, ry] = this.xy(i * 10);
      svg('text', { x: fx + 0.5, y: 10.45, 'font-size': 0.32, 'text-anchor': 'middle', fill: '#555' }, s)
        .textContent = FILES[i];
      svg('text', { x: -0.3, y: ry + 0.6, 'font-size': 0.32, 'text-anchor': 'middle', fill: '#555' }, s)
        .textContent = String(i + 1);
    }
    if (this.view.check) {
      const side = this.view.fen.split(' ')[1] === 'w' ? 'K' : 'k';
      const k = board.indexOf(side);
      if (k >= 0) {
        const [x, y] = this.xy(k);
        svg('circle', { cx: x + 0.5, cy: y + 0.5, r: 0.48, fill: 'rgba(220,30,30,0.55)', 'pointer-events': 'none' }, s);
      }
    }
    const pieces = svg('g', {}, s);
    board.forEach((p, i) => {
      if (p && !(this.drag && this.drag.moved && this.drag.from === i)) {
        const [x, y] = this.xy(i);
        drawPiece(pieces, p, x, y);
      }
    });
    if (this.selected >= 0) {
      for (const m of this.targets(this.selected)) {
        const [x, y] = this.xy(splitMove(m.uci)[1]);
        svg('circle', { cx: x + 0.5, cy: y + 0.5, r: 0.15, fill: 'rgba(20,60,20,0.5)', class: 'target', 'pointer-events': 'none' }, s);
      }
    }
    this.drawArrows(s);
    if (this.drag && this.drag.moved) {
      this.ghost = drawPiece(s, board[this.drag.from], this.drag.x - 0.5, this.drag.y - 0.5);
    }
  }
  drawArrows(s) {
    const arrows = this.view.arrows || [];
    if (!arrows.length) return;
    const defs = svg('defs', {}, s);
    const marker = svg('marker', { id: 'head', viewBox: '0 0 10 10', refX: 5, refY: 5, markerWidth: 3, markerHeight: 3, orient: 'auto' }, defs);
    svg('path', { d: 'M0 0 L10 5 L0 10 Z', fill: '#1f6fd0' }, marker);
    const g = svg('g', { class: 'arrows', 'pointer-events': 'none' }, s);
    for (const a of arrows) {
      const mv = splitMove(a.uci);
      if (!mv) continue;
      const [x1, y1] = this.xy(mv[0]), [x2, y2] = this.xy(mv[1]);
      const dx = x2 - x1, dy = y2 - y1, len = Math.hypot(dx, dy) || 1;
      const shorten = 0.3 / len;
      svg('line', {
        x1: x1 + 0.5, y1: y1 + 0.5, x2: x2 + 0.5 - dx * shorten, y2: y2 + 0.5 - dy * shorten,
        stroke: '#1f6fd0', 'stroke-width': 0.06 + 0.16 * a.weight, 'stroke-linecap': 'round',
        opacity: 0.35 + 0.5 * a.weight, 'marker-end': 'url(#head)', class: 'arrow',
      }, g);
    }
  }
  ownPiece(i) {
    const p = parseFen(this.view.fen)[i];
    const white = this.view.fen.split(' ')[1] === 'w';
    return p && isWhite(p) === white;
  }
  down(e) {
    if (!this.onMove || !this.view.movable) return;
    const i = this.squareAt(e);
    if (i < 0) return;
    if (this.selected >= 0 && i !== this.selected && !this.ownPiece(i)) {
      const from = this.selected;
      this.selected = -1;
      this.draw();
      this.onMove(from, i);
      return;
    }
    if (this.ownPiece(i)) {
      this.selected = i;
      const [x, y] = this.xy(i);
      this.drag = { from: i, x: x + 0.5, y: y + 0.5, moved: false };
      this.svg.setPointerCapture(e.pointerId);
    } else {
      this.selected = -1;
    }
    this.draw();
  }
  moveDrag(e) {
    if (!this.drag) return;
    const pt = this.svg.createSVGPoint();
    pt.x = e.clientX; pt.y = e.clientY;
    const p = pt.matrixTransform(this.svg.getScreenCTM().inverse());
    if (!this.drag.moved && Math.hypot(p.x - this.drag.x, p.y - this.drag.y) < 0.3) return;
    this.drag.x = p.x; this.drag.y = p.y;
    if (!this.drag.moved) { this.drag.moved = true; this.draw(); return; }
    if (this.ghost) this.ghost.setAttribute('transform', `translate(${p.x - 0.5} ${p.y - 0.5}) scale(0.01)`);
  }
  up(e) {
    if (!this.drag) return;
    const from = this.drag.from;
    this.drag = null;
    this.ghost = null;
    const i = this.squareAt(e);
    if (i >= 0 && i !== from) {
      this.selected = -1;
      this.draw();
      this.onMove(from, i);
    } else {
      this.draw();
    }
  }
}

// ---- Shared panels ----
const KINDS = { pawn: 'pawn', knight: 'knight', bishop: 'bishop', rook: 'rook', queen: 'queen', king: 'king' };
function renderRules(table, rules, side) {
  table.textContent = '';
  const head = html('tr', {}, undefined, table);
  for (const h of ['', 'Rule 5 period', 'moves left', 'king', 'Rule 6: banned next']) html('th', {}, h, head);
  for (const color of ['white', 'black']) {
    const r = rules[color];
    const id = `${table.id}-${color}`;
    const row = html('tr', { id }, undefined, table);
    html('td', {}, color === side ? `${color} (to move)` : color, row);
    html('td', { id: `${id}-period` }, r.control_period ? `${r.control_period[0]}–${r.control_period[1]}` : 'none', row);
    html('td', { id: `${id}-left` }, r.moves_left === null ? '–' : String(r.moves_left), row);
    const king = r.must_move_king ? 'must move now' : r.king_moved_in_period ? 'moved' : r.control_period ? 'not yet moved' : '–';
    html('td', { id: `${id}-king`, class: r.must_move_king ? 'alert' : '' }, king, row);
    const banned = r.banned_kind ? KINDS[r.banned_kind] || r.banned_kind : 'none';
    const run = r.last_kind ? ` (last: ${r.last_kind} x${r.run_length})` : '';
    html('td', { id: `${id}-banned`, class: r.banned_kind ? 'alert' : '' }, banned + run, row);
  }
}
const REASONS = {
  'checkmate': 'Checkmate',
  'king-quota': 'King quota (rule 5): the king had to move and could not',
  'stalemate': 'Stalemate',
  'threefold': 'Threefold repetition',
  'fifty-move': 'Fifty-move rule',
  'dead-position': 'Dead position',
  'adjudication': 'Adjudicated',
};
function renderBanner(banner, outcome) {
  if (!outcome) { banner.hidden = true; return; }
  const who = outcome.winner ? `${outcome.winner === 'white' ? 'White' : 'Black'} wins` : 'Draw';
  banner.textContent = `${REASONS[outcome.reason] || outcome.reason} — ${who} (${outcome.result})`;
  banner.dataset.reason = outcome.reason;
  banner.hidden = false;
}
// SAN moves with move numbers; `start` is the FEN the moves start from.
function renderMoves(box, moves, start, current, onClick) {
  box.textContent = '';
  const parts = start.split(' ');
  let number = parseInt(parts[5] || '1', 10);
  let white = parts[1] !== 'b';
  moves.forEach((m, i) => {
    if (white) html('span', { class: 'num' }, `${number}.`, box);
    else if (i === 0) html('span', { class: 'num' }, `${number}...`, box);
    const span = html('span', { class: 'move' + (i + 1 === current ? ' current' : ''), 'data-ply': i + 1 }, m.san, box);
    if (onClick) span.addEventListener('click', () => onClick(i + 1));
    if (!white) number++;
    white = !white;
  });
  const cur = box.querySelector('.current');
  if (cur) cur.scrollIntoView({ block: 'nearest' });
}
async function api(path, options) {
  const response = await fetch(path, options);
  const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}
function showMessage(id, text, error) {
  const m = el(id);
  m.textContent = text || '';
  m.classList.toggle('error', !!error);
}

// ---- Play ----
const play = { session: null, state: null, thinking: null, events: null, pending: null };
const playBoard = new Board(el('play-board'), (from, to) => tryMove(from, to));

function humanToMove(state) {
  const i = state.side === 'white' ? 0 : 1;
  return !state.outcome && state.players[i] === 'human';
}
function renderPlay() {
  const s = play.state;
  if (!s) return;
  const last = s.moves.length ? s.moves[s.moves.length - 1].uci : null;
  const t = play.thinking;
  let arrows = [];
  if (t && t.fen === s.fen && s.thinking) {
    const total = t.top.reduce((a, m) => a + m.visits, 0);
    if (total > 0) {
      arrows = t.top.filter((m) => m.visits > 0).slice(0, 5).map((m) => ({ uci: m.uci, weight: m.visits / total }));
    } else if (t.pv.length) {
      arrows = [{ uci: t.pv[0], weight: 1 }];
    }
  }
  playBoard.show({ fen: s.fen, legal: s.legal, lastMove: last, check: s.in_check, movable: humanToMove(s), arrows });
  const side = s.side === 'white' ? 'White' : 'Black';
  let status = `${side} to move`;
  if (s.outcome) status = 'game over';
  else if (s.waiting) status = `${side} (engine) waits: the server is busy with other searches`;
  else if (s.thinking) status = `${side} (${s.players[s.side === 'white' ? 0 : 1]}) is thinking…`;
  el('status').textContent = `— ${status}`;
  renderRules(el('play-rules'), s.rules, s.side);
  renderBanner(el('play-banner'), s.outcome);
  renderMoves(el('play-moves'), s.moves, s.start_fen, s.moves.length);
  if (s.note) showMessage('message', s.note, true);
}
function renderThinking() {
  const t = play.thinking;
  if (!t) return;
  el('thinking-engine').textContent = `— ${t.engine}${t.done ? ' (done)' : ''}`;
  const [w, d, l] = t.white_wdl;
  const bar = el('wdl');
  bar.querySelector('.w').style.width = `${100 * w}%`;
  bar.querySelector('.d').style.width = `${100 * d}%`;
  bar.querySelector('.l').style.width = `${100 * l}%`;
  const pct = (x) => `${Math.round(100 * x)}%`;
  let text = `White: win ${pct(w)}, draw ${pct(d)}, loss ${pct(l)} · `;
  text += t.depth === null ? `${t.nodes} playouts` : `depth ${t.depth}, ${t.nodes} nodes`;
  if (t.score_cp !== null) text += `, ${(t.score_cp / 100).toFixed(2)} for the side to move`;
  el('wdl-text').textContent = text;
  const table = el('top-moves');
  table.textContent = '';
  if (t.top.length) {
    const head = html('tr', {}, undefined, table);
    for (const h of ['move', 'visits', 'Q', 'prior']) html('th', {}, h, head);
    for (const m of t.top) {
      const row = html('tr', { class: 'top-move' }, undefined, table);
      html('td', {}, m.san, row);
      html('td', {}, String(m.visits), row);
      html('td', {}, m.q === null ? '–' : m.q.toFixed(3), row);
      html('td', {}, m.prior.toFixed(3), row);
    }
  }
  el('pv').textContent = t.pv_san.length ? `PV: ${t.pv_san.join(' ')}` : '';
  renderPlay();
}
async function command(cmd) {
  try {
    const state = await api('/api/command', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ session: play.session, command: cmd }),
    });
    showMessage('message', '');
    applyState(state);
    return true;
  } catch (e) {
    showMessage('message', e.message, true);
    return false;
  }
}
function applyState(state) {
  if (play.state && state.version < play.state.version) return; // stale
  play.state = state;
  renderPlay();
}
function tryMove(from, to) {
  const base = squareName(from) + squareName(to);
  const promotions = play.state.legal.filter((m) => m.uci.startsWith(base) && m.uci.length > base.length);
  if (promotions.length) {
    play.pending = base;
    el('promotion').hidden = false;
    return;
  }
  // Sent even when it is not among the legal moves: the server refuses it.
  command({ type: 'move', move: base });
}
for (const b of document.querySelectorAll('#promotion button')) {
  b.addEventListener('click', () => {
    el('promotion').hidden = true;
    const base = play.pending;
    play.pending = null;
    if (base && b.dataset.promo) command({ type: 'move', move: base + b.dataset.promo });
  });
}
el('flip').addEventListener('click', () => { playBoard.flipped = !playBoard.flipped; renderPlay(); });
el('takeback').addEventListener('click', () => command({ type: 'takeback' }));
el('new-game').addEventListener('submit', (e) => {
  e.preventDefault();
  play.thinking = null;
  el('top-moves').textContent = '';
  el('pv').textContent = '';
  el('wdl-text').textContent = '';
  el('thinking-engine').textContent = '';
  const fen = el('fen').value.trim();
  command({ type: 'new_game', white: el('white').value.trim(), black: el('black').value.trim(), fen: fen || null });
});
async function startSession() {
  const reply = await api('/api/session', { method: 'POST' });
  play.session = reply.session;
  play.state = null;
  applyState(reply.state);
  if (play.events) play.events.close();
  const events = new EventSource(`/api/events?session=${play.session}`);
  play.events = events;
  events.addEventListener('state', (e) => applyState(JSON.parse(e.data)));
  events.addEventListener('thinking', (e) => { play.thinking = JSON.parse(e.data); renderThinking(); });
  events.onerror = () => {
    // The browser retries by itself; a session the server dropped is gone
    // for good, so start a new one then.
    if (events.readyState === EventSource.CLOSED) setTimeout(startSession, 1000);
  };
}

// ---- Watch ----
// `load` numbers game requests: a click may overtake a load still in flight
// (a source's first game), and only the newest request may show its game.
const watch = { source: null, list: [], selected: null, view: null, ply: 0, text: null, timer: null, load: 0 };
const watchBoard = new Board(el('watch-board'), null);

function renderWatch() {
  const v = watch.view;
  if (!v) return;
  const p = v.plies[watch.ply];
  watchBoard.show({ fen: p.fen, legal: [], lastMove: p.move ? p.move.uci : null, check: p.in_check, movable: false });
  el('w-ply').textContent = `ply ${watch.ply} / ${v.plies.length - 1}`;
  const side = p.fen.split(' ')[1] === 'w' ? 'white' : 'black';
  renderRules(el('watch-rules'), p.rules, side);
  renderMoves(el('watch-moves'), v.plies.slice(1).map((q) => q.move), v.plies[0].fen, watch.ply, (ply) => { watch.ply = ply; renderWatch(); });
  renderBanner(el('watch-banner'), watch.ply === v.plies.length - 1 ? v.outcome : null);
  const tag = (name) => (v.tags.find(([k]) => k === name) || [null, '?'])[1];
  el('w-title').textContent = `— ${tag('White')} vs ${tag('Black')}`;
}
function step(to) {
  if (!watch.view) return;
  watch.ply = Math.max(0, Math.min(watch.view.plies.length - 1, to));
  renderWatch();
}
el('w-first').addEventListener('click', () => step(0));
el('w-prev').addEventListener('click', () => step(watch.ply - 1));
el('w-next').addEventListener('click', () => step(watch.ply + 1));
el('w-last').addEventListener('click', () => step(Infinity));
el('w-flip').addEventListener('click', () => { watchBoard.flipped = !watchBoard.flipped; renderWatch(); });
document.addEventListener('keydown', (e) => {
  if (el('view-watch').hidden || e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') return;
  const keys = { ArrowLeft: watch.ply - 1, ArrowRight: watch.ply + 1, Home: 0, End: Infinity };
  if (e.key in keys) { e.preventDefault(); step(keys[e.key]); }
});
function renderGameList() {
  const table = el('w-games');
  table.textContent = '';
  const head = html('tr', {}, undefined, table);
  const arena = watch.source && watch.source.kind === 'arena';
  for (const h of [arena ? 'board' : '#', 'White', 'Black', 'result', 'plies']) html('th', {}, h, head);
  for (const g of watch.list) {
    const key = arena ? g.board : g.index;
    const row = html('tr', { class: 'game' + (key === watch.selected ? ' selected' : ''), 'data-game': key }, undefined, table);
    const result = arena ? (g.outcome ? g.outcome.result : `game ${g.game_number}, playing`) : g.result;
    for (const c of [String(key + 1), g.white, g.black, result, String(g.plies)]) html('td', {}, c, row);
    row.addEventListener('click', () => { el('w-follow').checked = false; loadGame(key); });
  }
}
async function loadGame(key, follow) {
  const s = watch.source;
  const load = ++watch.load;
  let view;
  try {
    if (s.kind === 'upload') {
      view = await api(`/api/pgn?game=${key}`, { method: 'POST', body: watch.text });
    } else if (s.kind === 'arena') {
      view = await api(`/api/arena?board=${key}`);
    } else {
      view = await api(`/api/pgn?path=${encodeURIComponent(s.path)}&game=${key}`);
    }
  } catch (e) {
    if (load === watch.load) showMessage('watch-message', e.message, true);
    return;
  }
  if (load !== watch.load) return;
  const same = watch.selected === key && watch.view;
  watch.selected = key;
  watch.view = view;
  if (follow || !same) watch.ply = follow ? view.plies.length - 1 : 0;
  watch.ply = Math.min(watch.ply, view.plies.length - 1);
  renderGameList();
  renderWatch();
}
// One refresh of a source at a time: on a busy machine a reply can take
// longer than the timer's period, and each refresh's game load would then be
// overtaken by the next one's before it is shown, so the page never moved on.
async function refreshSource() {
  const s = watch.source;
  if (!s || s.refreshing) return;
  s.refreshing = true;
  const follow = el('w-follow').checked;
  try {
    if (s.kind === 'live') {
      const live = await api('/api/live');
      if (watch.source !== s) return;
      s.path = live.file;
      watch.list = live.games;
      el('w-source').textContent = live.file ? `newest self-play games: ${live.file}` : 'no self-play games yet';
      renderGameList();
      if (live.games.length && (follow || watch.selected === null)) await loadGame(live.games[live.games.length - 1].index, follow);
    } else if (s.kind === 'arena') {
      const list = await api('/api/arena');
      if (watch.source !== s) return;
      watch.list = list;
      el('w-source').textContent = `${watch.list.length} arena boards`;
      renderGameList();
      if (watch.list.length) await loadGame(watch.selected === null ? 0 : watch.selected, follow);
    }
    showMessage('watch-message', '');
  } catch (e) {
    showMessage('watch-message', e.message, true);
  } finally {
    s.refreshing = false;
  }
}
function setSource(source, list) {
  clearInterval(watch.timer);
  watch.load++;
  watch.source = source;
  watch.selected = null;
  watch.view = null;
  watch.list = list || [];
  renderGameList();
  if (source.kind === 'live' || source.kind === 'arena') {
    refreshSource();
    watch.timer = setInterval(refreshSource, source.kind === 'arena' ? 1000 : 3000);
  }
}
el('src-live').addEventListener('click', () => setSource({ kind: 'live' }));
el('src-arena').addEventListener('click', () => setSource({ kind: 'arena' }));
el('src-file').addEventListener('change', async (e) => {
  const path = e.target.value;
  if (!path) return;
  try {
    const list = await api(`/api/pgn?path=${encodeURIComponent(path)}`);
    el('w-source').textContent = path;
    setSource({ kind: 'file', path }, list.games);
    if (list.games.length) await loadGame(0);
  } catch (err) {
    showMessage('watch-message', err.message, true);
  }
});
el('src-upload').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  const text = await file.text();
  try {
    const list = await api('/api/pgn', { method: 'POST', body: text });
    watch.text = text;
    el('w-source').textContent = `uploaded: ${file.name}`;
    setSource({ kind: 'upload' }, list.games);
    if (list.games.length) await loadGame(0);
  } catch (err) {
    showMessage('watch-message', err.message, true);
  }
});
async function listFiles() {
  const select = el('src-file');
  try {
    const files = await api('/api/games');
    for (const f of files) html('option', { value: f.path }, `${f.path} (${Math.round(f.bytes / 1024)} KB)`, select);
  } catch (e) {
    select.disabled = true;
  }
}

// ---- Training ----
const COLORS = ['#1f6fd0', '#d0491f', '#2a9d4b', '#8e44ad', '#c9a227', '#16a2b8', '#555'];
const GROUPS = [
  ['Losses', /^loss\//],
  ['Ladder score', /^ladder\/score/],
  ['Ladder Elo', /^ladder\/elo/],
  ['Self-play games per hour', /games_per_hour$/],
];
function chart(parent, title, series) {
  const box = html('div', { class: 'chart' }, undefined, parent);
  html('h3', {}, title, box);
  const W = 520, H = 220, L = 56, R = 10, T = 8, B = 28;
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}` }, box);
  const all = series.flatMap(([, pts]) => pts);
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[2])), Math.max(...all.map((p) => p[2]))];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 1; y1 += 1; }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const X = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B, fill: '#fafafa', stroke: '#ccc' }, s);
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4, x = x0 + (x1 - x0) * i / 4;
    svg('line', { x1: L, x2: W - R, y1: Y(y), y2: Y(y), stroke: '#eee' }, s);
    svg('text', { x: L - 4, y: Y(y) + 4, 'font-size': 11, 'text-anchor': 'end', fill: '#555' }, s).textContent = +y.toPrecision(3);
    const anchor = i === 0 ? 'start' : i === 4 ? 'end' : 'middle';
    svg('text', { x: X(x), y: H - 12, 'font-size': 11, 'text-anchor': anchor, fill: '#555' }, s).textContent = Math.round(x);
  }
  svg('text', { x: (L + W - R) / 2, y: H - 1, 'font-size': 10, 'text-anchor': 'middle', fill: '#888' }, s).textContent = 'step';
  const legend = html('div', { class: 'legend' }, undefined, box);
  series.forEach(([tag, pts], k) => {
    const color = COLORS[k % COLORS.length];
    svg('polyline', {
      points: pts.map((p) => `${X(p[0]).toFixed(1)},${Y(p[2]).toFixed(1)}`).join(' '),
      fill: 'none', stroke: color, 'stroke-width': 1.6, class: 'series',
    }, s);
    if (pts.length === 1) svg('circle', { cx: X(pts[0][0]), cy: Y(pts[0][2]), r: 3, fill: color }, s);
    const item = html('span', {}, undefined, legend);
    html('i', { style: `background:${color}` }, undefined, item);
    item.appendChild(document.createTextNode(`${tag}: ${+pts[pts.length - 1][2].toPrecision(4)}`));
  });
}
async function loadTraining() {
  const charts = el('charts');
  try {
    const m = await api('/api/metrics');
    charts.textContent = '';
    if (!m.found) { showMessage('training-message', 'no logs/metrics.jsonl in the run directory yet'); return; }
    const tags = Object.keys(m.series);
    const used = new Set();
    for (const [title, re] of GROUPS) {
      const mine = tags.filter((t) => re.test(t));
      mine.forEach((t) => used.add(t));
      if (mine.length) chart(charts, title, mine.map((t) => [t, m.series[t]]));
    }
    showMessage('training-message', `${used.size} of the ${tags.length} series in logs/metrics.jsonl; ` +
      'TensorBoard has the full picture');
  } catch (e) {
    showMessage('training-message', e.message, true);
  }
}

// ---- Tabs and start ----
let trainingTimer = null;
for (const tab of document.querySelectorAll('.tab')) {
  tab.addEventListener('click', () => {
    for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t === tab);
    for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== `view-${tab.dataset.view}`;
    clearInterval(trainingTimer);
    if (tab.dataset.view === 'training') {
      loadTraining();
      trainingTimer = setInterval(loadTraining, 15000);
    }
  });
}
async function start() {
  try {
    const info = await api('/api/info');
    const seats = ['human', 'random', 'greedy', 'alphabeta:1', 'alphabeta:2', 'alphabeta:3', 'alphabeta:4'];
    if (info.network) seats.push('net', 'net:playouts=800', 'net:movetime=1000');
    seats.push(...info.engines);
    for (const s of seats) html('option', { value: s }, undefined, el('seats'));
    el('server-info').textContent = (info.network ? `net: ${info.network}` : 'no network loaded') +
      ` · ${info.max_searches} search slot(s) · mixzero ${info.version}`;
    el('src-arena').hidden = !info.arena;
    if (info.run_dir) listFiles(); else { el('src-live').hidden = true; el('src-file').hidden = true; }
    if (info.arena) { el('tab-watch').click(); setSource({ kind: 'arena' }); }
    await startSession();
  } catch (e) {
    showMessage('message', e.message, true);
  }
}
start();
