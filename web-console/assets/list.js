// Session list: rows keyed by id and updated in place (thumbnails keep loading smoothly),
// filters, live updates from /v1/stream.
import {
    api, el, fmtAge, goLogin, initHeader, isLeaving, labelList, openStream, sessionUrl, seg, setApprovalCount,
    showError,
} from './api.js';

const THUMB_MS = 4000;
const rows = new Map(); // id -> {tr, session, img}
let sessions = [];

const tbody = document.getElementById('session-rows');
const fState = document.getElementById('filter-state');
const fTemplate = document.getElementById('filter-template');
const fText = document.getElementById('filter-text');
const count = document.getElementById('list-count');
const empty = document.getElementById('empty');
const error = document.getElementById('list-error');

function live(state) {
    return state === 'running' || state === 'paused';
}

// The screenshot route takes no cache-busting parameter: fetch it uncached, show it as a blob.
// thumbnail=1: a glance for this list, neither kept on the timeline nor counted as activity
// (a list left open must not keep sessions from their idle timeout).
async function loadThumb(row) {
    const img = row.img;
    if (!img || row.loading)
        return;
    row.loading = true;
    try {
        const resp = await fetch('/v1/sessions/' + seg(row.session.id) + '/screenshot?format=jpeg&max_edge=320&thumbnail=1',
            { cache: 'no-store', credentials: 'same-origin' });
        if (resp.status === 401)
            goLogin();
        if (!resp.ok)
            throw new Error('HTTP ' + resp.status);
        const url = URL.createObjectURL(await resp.blob());
        if (img.src.startsWith('blob:'))
            URL.revokeObjectURL(img.src);
        img.src = url;
        img.alt = 'Screen of ' + (row.session.name || row.session.id);
    } catch {
        img.alt = 'Screen of ' + (row.session.name || row.session.id) + ' (not available)';
    } finally {
        row.loading = false;
    }
}

function makeRow(s) {
    const tr = el('tr', { 'data-id': s.id });
    tr.append(el('td', { class: 'thumb' }), el('td'), el('td'), el('td'), el('td', { class: 'age' }),
        el('td'));
    return { tr, session: null, img: null };
}

function fillThumb(row, s) {
    const cell = row.tr.cells[0];
    if (live(s.state)) {
        if (!row.img) {
            row.img = el('img', {
                alt: 'Screen of ' + (s.name || s.id), width: 160, height: 120, decoding: 'async',
            });
            cell.replaceChildren(el('a', { href: sessionUrl(s.id), tabindex: '-1' }, row.img));
            queueMicrotask(() => loadThumb(row));
        }
    } else {
        if (row.img && row.img.src.startsWith('blob:'))
            URL.revokeObjectURL(row.img.src);
        row.img = null;
        cell.replaceChildren(el('div', { class: 'placeholder' }, s.state));
    }
}

function fillRow(row, s) {
    const prev = row.session;
    row.session = s;
    if (!prev || prev.state !== s.state)
        fillThumb(row, s);
    const [, name, state, template, age, labels] = row.tr.cells;
    name.replaceChildren(el('a', { href: sessionUrl(s.id) }, s.name || s.id), el('br'),
        el('span', { class: 'id' }, s.id));
    const holder = s.control && s.control.holder;
    state.replaceChildren(el('span', { class: 'state state-' + s.state }, s.state),
        holder ? el('div', { class: 'notice' }, 'controlled by ' + holder) : '');
    template.textContent = s.template + (s.template_version ? ' v' + s.template_version : '');
    age.textContent = fmtAge(s.created_at);
    age.title = s.created_at || '';
    labels.replaceChildren(...labelList(s.labels).map((l) => el('span', { class: 'label-chip' }, l)));
}

function matches(s) {
    if (fState.value && s.state !== fState.value)
        return false;
    if (fTemplate.value && s.template !== fTemplate.value)
        return false;
    const q = fText.value.trim().toLowerCase();
    if (q) {
        const hay = [s.id, s.name, s.template, ...labelList(s.labels)].join(' ').toLowerCase();
        if (!hay.includes(q))
            return false;
    }
    return true;
}

function updateTemplates() {
    const names = [...new Set(sessions.map((s) => s.template).filter(Boolean))].sort();
    const have = [...fTemplate.options].slice(1).map((o) => o.value);
    if (names.join('\n') === have.join('\n'))
        return;
    const chosen = fTemplate.value;
    fTemplate.replaceChildren(el('option', { value: '' }, 'any'),
        ...names.map((n) => el('option', { value: n }, n)));
    fTemplate.value = names.includes(chosen) ? chosen : '';
}

function render() {
    updateTemplates();
    const seen = new Set();
    const shown = [];
    const ordered = [...sessions].sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
    for (const s of ordered) {
        if (s.state === 'destroyed')
            continue;
        seen.add(s.id);
        let row = rows.get(s.id);
        if (!row) {
            row = makeRow(s);
            rows.set(s.id, row);
        }
        fillRow(row, s);
        if (matches(s))
            shown.push(row.tr);
    }
    for (const [id, row] of rows) {
        if (!seen.has(id)) {
            row.tr.remove();
            rows.delete(id);
        }
    }
    // Reorder without recreating: append moves existing nodes.
    const current = [...tbody.children];
    if (current.length !== shown.length || current.some((tr, i) => tr !== shown[i]))
        tbody.replaceChildren(...shown);
    const total = seen.size;
    count.textContent = shown.length === total ? total + ' sessions'
        : shown.length + ' of ' + total + ' sessions shown';
    empty.hidden = shown.length > 0;
}

function refreshThumbs() {
    if (document.hidden)
        return;
    for (const row of rows.values()) {
        // A paused screen does not change: keep its picture.
        if (row.img && row.session.state === 'running' && row.tr.isConnected)
            loadThumb(row);
    }
    for (const row of rows.values())
        row.tr.cells[4].textContent = fmtAge(row.session.created_at);
}

function setSessions(list) {
    sessions = Array.isArray(list) ? list : [];
    render();
}

for (const f of [fState, fTemplate])
    f.addEventListener('change', render);
fText.addEventListener('input', render);
document.getElementById('filters').addEventListener('submit', (ev) => ev.preventDefault());

async function main() {
    await initHeader();
    if (isLeaving())
        return;
    try {
        setSessions((await api('GET', '/v1/sessions')).sessions);
        showError(error, null);
    } catch (e) {
        showError(error, e, 'Cannot list sessions');
    }
    try {
        const a = await api('GET', '/v1/approvals?state=pending');
        setApprovalCount((a.approvals || []).length);
    } catch {
        // the stream gives the count too
    }
    openStream('', {
        sessions: (d) => setSessions(d.sessions),
        approvals: (d) => setApprovalCount((d.approvals || []).filter((a) => !a.state || a.state === 'pending').length),
    }, document.getElementById('stream-status'));
    setInterval(refreshThumbs, THUMB_MS);
}

main();
