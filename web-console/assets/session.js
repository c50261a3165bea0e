// Session page: live desktop, control lease, controls, timeline, artifacts, diff.
import {
    api, el, fmtAge, fmtBytes, fmtDateTime, fmtDuration, fmtTime, initHeader, isLeaving, labelList, openStream,
    seg, setApprovalCount, showError,
} from './api.js';
import { ConsoleView } from './console.js';
import { RecordingPanel } from './recording.js';
import { TerminalPanel } from './terminal.js';

const id = new URLSearchParams(location.search).get('id');
const base = '/v1/sessions/' + seg(id || '');
const $ = (x) => document.getElementById(x);

let me = null;
let session = null;
let holder = null; // the control lease's holder, or null
const events = new Map(); // seq -> event
let lastSeq = 0;
let busy = false;

const actionError = $('action-error');
const actionStatus = $('action-status');

/* ---------- session facts and controls ---------- */

const ENABLED = {
    pause: ['running'],
    resume: ['paused', 'hibernated'],
    hibernate: ['running'],
    stop: ['running', 'paused'],
    start: ['stopped', 'crashed'],
};
const NOT_DEAD = (s) => s !== 'destroyed' && s !== 'creating';

function setSession(s) {
    const prevState = session ? session.state : undefined;
    session = s;
    document.title = (s.name || s.id) + ' · carrel';
    $('session-title').textContent = s.name || s.id;
    const st = $('session-state');
    st.textContent = s.state;
    st.className = 'state state-' + s.state;
    $('session-id').textContent = s.id;
    const facts = [
        ['Template', s.template + (s.template_version ? ' v' + s.template_version : '')],
        ['State', s.state + (s.state_reason ? ' (' + s.state_reason + ')' : '')],
        ['Created', fmtDateTime(s.created_at) + ' (' + fmtAge(s.created_at) + ' ago)'],
        ['Origin', s.origin],
        ['vCPUs / memory', (s.vcpus ?? '?') + ' / ' + (s.memory_mib ?? '?') + ' MiB'],
        ['Expires', s.expires_at ? fmtDateTime(s.expires_at) : ''],
        ['Labels', labelList(s.labels).join(', ')],
        ['Domain', s.domain],
    ];
    $('facts').replaceChildren(...facts.filter(([, v]) => v).flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
    if (s.control !== undefined)
        setHolder(s.control ? s.control.holder : null);
    updateButtons();
    // The desktop comes back: connect again.
    const live = s.state === 'running' || s.state === 'paused';
    const wasLive = prevState === 'running' || prevState === 'paused';
    if (live && !wasLive && prevState !== undefined)
        view.connect();
    if (!live) {
        view.stop();
        $('spice-screen').replaceChildren(el('p', { class: 'console-placeholder' },
            'The desktop is not running (' + s.state + ').'));
        view.setStatus('');
    }
}

function updateButtons() {
    const state = session ? session.state : '';
    for (const b of document.querySelectorAll('#controls button')) {
        const allowed = ENABLED[b.dataset.action];
        b.disabled = busy || (allowed ? !allowed.includes(state) : !NOT_DEAD(state));
    }
    const mine = holder && me && holder === me.name;
    const live = state === 'running' || state === 'paused';
    $('take-over').hidden = !!mine;
    $('take-over').disabled = busy || !live || (!!holder && !mine);
    $('release').hidden = !mine;
    $('reconnect').disabled = !live;
    const vv = $('download-vv');
    vv.hidden = !mine;
    // The shell is the lease holder's, like the keyboard: it closes when the lease goes.
    $('terminal-section').hidden = !(mine && live);
    if (!(mine && live))
        terminal.close();
    vv.href = base + '/console.vv';
}

function setHolder(h) {
    holder = h || null;
    const badge = $('control-badge');
    const mine = holder && me && holder === me.name;
    // In control the desktop is shown 1:1 (mouse offsets): give it the whole width.
    $('session-layout').classList.toggle('wide', !!mine);
    if (mine) {
        badge.textContent = 'You control the desktop';
        badge.className = 'badge in-control';
        $('console-hint').textContent = 'Keyboard and mouse go to the guest while the desktop has focus. ' +
            'Shift+Esc leaves the desktop. Agents cannot send input until you release.';
    } else if (holder) {
        badge.textContent = 'View only · controlled by ' + holder;
        badge.className = 'badge held-by-other';
        $('console-hint').textContent = holder + ' holds the control lease.';
    } else {
        badge.textContent = 'View only';
        badge.className = 'badge view-only';
        $('console-hint').textContent = 'View only: keyboard and mouse are not sent to the guest. ' +
            'Take over to control it.';
    }
    updateButtons();
}

// Runs one control with the page busy; errors go to the alert. Returns the reply or undefined.
async function run(label, method, path, body) {
    busy = true;
    updateButtons();
    showError(actionError, null);
    const started = Date.now();
    actionStatus.textContent = label + '…';
    const tick = setInterval(() => {
        actionStatus.textContent = label + '… ' + Math.round((Date.now() - started) / 1000) + ' s';
    }, 1000);
    try {
        const reply = await api(method, path, body);
        actionStatus.textContent = label + ': done in ' + fmtDuration(Date.now() - started) + '.';
        return reply ?? {};
    } catch (e) {
        actionStatus.textContent = '';
        showError(actionError, e, label + ' failed');
        return undefined;
    } finally {
        clearInterval(tick);
        busy = false;
        updateButtons();
    }
}

function applySessionReply(reply) {
    if (reply && reply.id === session.id && reply.state)
        setSession(reply);
}

async function simple(action, label) {
    applySessionReply(await run(label, 'POST', base + '/' + action, {}));
}

function ask(dialog) {
    return new Promise((resolve) => {
        dialog.addEventListener('close', () => resolve(dialog.returnValue), { once: true });
        dialog.returnValue = '';
        dialog.showModal();
    });
}

const actions = {
    pause: () => simple('pause', 'Pausing'),
    resume: () => simple('resume', 'Resuming'),
    hibernate: () => simple('hibernate', 'Hibernating'),
    stop: () => simple('stop', 'Stopping'),
    start: () => simple('start', 'Starting'),
    async snapshot() {
        const input = $('snapshot-name');
        input.value = 'review-' + new Date().toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
        if (await ask($('dlg-snapshot')) !== 'ok')
            return;
        const snap = await run('Taking snapshot ' + input.value, 'POST', base + '/snapshots', { name: input.value });
        if (snap)
            actionStatus.textContent = 'Snapshot ' + (snap.name || input.value) + ' taken.';
    },
    async revert() {
        const select = $('revert-name');
        let list;
        try {
            list = (await api('GET', base + '/snapshots')).snapshots || [];
        } catch (e) {
            showError(actionError, e, 'Cannot list snapshots');
            return;
        }
        select.replaceChildren(...list.map((s) => el('option', { value: s.name || s.id },
            (s.name || s.id) + ' · ' + fmtDateTime(s.created_at) + (s.memory ? ' · with memory' : ' · disk only'))));
        $('revert-ok').disabled = list.length === 0;
        $('revert-note').textContent = list.length ? 'What happened after the snapshot is lost.'
            : 'This session has no snapshot.';
        if (await ask($('dlg-revert')) !== 'ok' || !select.value)
            return;
        const reply = await run('Reverting to ' + select.value, 'POST', base + '/revert', { snapshot: select.value });
        applySessionReply(reply);
        // The desktop was replaced by the snapshot's: a new connection for it.
        if (reply && (session.state === 'running' || session.state === 'paused'))
            view.connect();
    },
    async extract() {
        const paths = $('extract-paths');
        if (await ask($('dlg-extract')) !== 'ok')
            return;
        const list = paths.value.split('\n').map((p) => p.trim()).filter(Boolean);
        if (!list.length)
            return;
        const x = await run('Extracting ' + list.join(', '), 'POST', base + '/artifacts', { paths: list });
        if (x)
            loadArtifacts();
    },
    async destroy() {
        if (await ask($('dlg-destroy')) !== 'ok')
            return;
        const reply = await run('Destroying', 'DELETE', base);
        if (reply)
            applySessionReply(reply);
    },
};

/* ---------- recording ---------- */

const recording = new RecordingPanel(base, {
    status: $('recording-status'),
    video: $('recording-video'),
    segments: $('recording-segments'),
});

/* ---------- terminal ---------- */

const terminal = new TerminalPanel($('terminal-screen'), $('terminal-status'), base + '/shell');

/* ---------- console and the control lease ---------- */

const view = new ConsoleView(id, {
    frame: $('console-frame'),
    screen: $('spice-screen'),
    status: $('console-status'),
    escapeTo: $('release'),
}, (state) => {
    document.body.dataset.console = state;
    document.body.dataset.viewOnly = String(view.viewOnly);
    autoReconnect(state);
});

// A connection that drops while the desktop runs is opened again (a few times, then the
// Reconnect button is left to the reviewer); a stop or hibernate is handled by setSession.
let retries = 0;
let retryTimer = null;
function autoReconnect(state) {
    if (state === 'connected') {
        retries = 0;
        return;
    }
    if ((state !== 'disconnected' && state !== 'error') || retryTimer || retries >= 3)
        return;
    retries++;
    retryTimer = setTimeout(() => {
        retryTimer = null;
        if (session && (session.state === 'running' || session.state === 'paused') && !view.connected)
            view.connect();
    }, 2000 * retries);
}

async function takeOver() {
    const r = await run('Taking over', 'POST', base + '/control', { action: 'take' });
    if (!r)
        return;
    setHolder(r.holder);
    await view.connect();
    $('release').focus();
}

async function release() {
    const r = await run('Releasing', 'POST', base + '/control', { action: 'release' });
    if (!r)
        return;
    setHolder(r.holder);
    await view.connect();
    $('take-over').focus();
}

/* ---------- timeline ---------- */

function summarize(ev) {
    const p = ev.params && typeof ev.params === 'object' ? ev.params : null;
    if (!p || Object.keys(p).length === 0)
        return '';
    if (Array.isArray(p.argv))
        return p.argv.join(' ');
    if (typeof p.text === 'string')
        return JSON.stringify(p.text);
    if (p.path)
        return p.path;
    if (Array.isArray(p.paths))
        return p.paths.join(', ');
    if (p.name)
        return p.name;
    if (typeof p.action === 'string')
        return p.action + (p.detail ? ' ' + JSON.stringify(p.detail) : '') + (p.state ? ' (' + p.state + ')' : '');
    const s = JSON.stringify(p);
    return s.length > 160 ? s.slice(0, 157) + '…' : s;
}

// Who acted: a person on the console, carreld itself, or an agent (any API caller; events of
// an older carreld without actor_kind count as that).
function actorKind(ev) {
    if (ev.actor_kind === 'person' || ev.actor_kind === 'carreld')
        return ev.actor_kind;
    return ev.actor === 'carreld' && !ev.actor_kind ? 'carreld' : 'agent';
}

function personSummary(ev) {
    const p = ev.params && typeof ev.params === 'object' ? ev.params : {};
    if (ev.action === 'click')
        return (p.modifiers && p.modifiers.length ? p.modifiers.join('+') + '+' : '') + (p.button || 'left') +
            ' click' + (p.x !== null && p.x !== undefined ? ' at ' + p.x + ', ' + p.y : '');
    if (ev.action === 'keys')
        return p.combo || '';
    if (ev.action === 'type')
        return p.redacted ? p.chars + (p.chars === 1 ? ' character' : ' characters') + ' typed (redacted by policy)'
            : JSON.stringify(p.text ?? '');
    return summarize(ev);
}

function renderEvent(ev) {
    const when = ev.time || ev.ts;
    const r = ev.result && typeof ev.result === 'object' ? ev.result : null;
    const who = actorKind(ev);
    const meta = [];
    if (ev.actor)
        meta.push('by ' + ev.actor);
    if (ev.duration_ms)
        meta.push(fmtDuration(ev.duration_ms));
    if (r && r.exit_code !== undefined && r.exit_code !== null)
        meta.push('exit code ' + r.exit_code);
    if (r && r.timed_out)
        meta.push('timed out');
    const summary = who === 'person' ? personSummary(ev) : summarize(ev);
    const what = el('div', { class: 'what' },
        el('span', { class: 'who who-' + who }, who + ' · ' + (ev.actor || '?')),
        el('span', { class: 'kind' }, ev.kind || 'event'), ' ', ev.action || '',
        summary ? el('span', { class: 'meta' }, ' · ', summary) : '',
        recording.mayHave(ev.seq) ? el('button', { type: 'button', class: 'seek', 'data-seq': ev.seq,
            'aria-label': 'Play the recording from event ' + ev.seq }, '▶ Play') : '',
        el('div', { class: 'meta' }, meta.join(' · ')),
        ev.error ? el('div', { class: 'ev-error' }, 'error: ' + ev.error) : '');
    let shot = el('span');
    if (ev.screenshot) {
        const src = base + '/screenshots/' + seg(ev.screenshot);
        shot = el('a', { href: src, target: '_blank', rel: 'noopener' },
            el('img', { src, alt: 'Screen after ' + (ev.action || ev.kind), loading: 'lazy', width: 128, height: 96 }));
    }
    return el('li', { 'data-seq': ev.seq, 'data-actor-kind': who, class: who + (ev.error ? ' failed' : '') },
        el('time', { datetime: when || '' }, fmtTime(when)), what, shot);
}

function addEvents(list) {
    const fresh = [];
    for (const ev of list || []) {
        if (ev.seq === undefined || events.has(ev.seq))
            continue;
        events.set(ev.seq, ev);
        lastSeq = Math.max(lastSeq, ev.seq);
        fresh.push(ev);
        if (ev.kind === 'artifacts')
            loadArtifacts();
    }
    if (!fresh.length)
        return;
    const ol = $('timeline');
    const scroller = $('timeline-scroll');
    const atEnd = scroller.scrollTop + scroller.clientHeight >= scroller.scrollHeight - 8;
    const shown = ol.lastElementChild ? Number(ol.lastElementChild.dataset.seq) : -1;
    fresh.sort((a, b) => a.seq - b.seq);
    // New events usually come after the last one shown: append them; else draw the list again.
    if (fresh[0].seq > shown)
        ol.append(...fresh.map(renderEvent));
    else
        redrawTimeline();
    filterTimeline();
    if (atEnd)
        scroller.scrollTop = scroller.scrollHeight;
}

function redrawTimeline() {
    $('timeline').replaceChildren(...[...events.values()].sort((a, b) => a.seq - b.seq).map(renderEvent));
}

function filterTimeline() {
    const show = $('timeline-filter').value;
    const ol = $('timeline');
    ol.classList.toggle('show-person', show === 'person');
    ol.classList.toggle('show-agent', show === 'agent');
    const shown = [...events.values()].filter((ev) => show === 'all' ||
        (show === 'person') === (actorKind(ev) === 'person')).length;
    $('timeline-status').textContent = shown + ' of ' + events.size + (events.size === 1 ? ' event' : ' events');
}

// A click on an event's Play button: its segment, at its offset.
async function playFrom(target) {
    const button = target.closest('button.seek');
    if (!button)
        return;
    const seq = Number(button.dataset.seq);
    for (const li of document.querySelectorAll('#timeline li.playing'))
        li.classList.remove('playing');
    if (await recording.seek(seq))
        button.closest('li').classList.add('playing');
}

async function loadTimeline() {
    try {
        for (let page = 0; page < 50; page++) {
            const r = await api('GET', base + '/events?after=' + lastSeq + '&limit=500');
            addEvents(r.events);
            if (!r.events || r.events.length < 500)
                break;
        }
    } catch (e) {
        $('timeline-status').textContent = 'Cannot load the timeline: ' + e.message;
    }
}

/* ---------- artifacts ---------- */

function renderExtraction(x) {
    const files = (x.artifacts || []).map((a) => {
        const label = a.guest_path || a.path || a.id;
        const info = [a.type, a.type === 'file' ? fmtBytes(a.size) : '', a.skipped ? 'skipped: ' + a.skipped : '']
            .filter(Boolean).join(', ');
        const downloadable = a.type === 'file' && !a.skipped && a.path !== null;
        const link = downloadable
            ? el('a', { href: '/v1/artifacts/' + seg(a.id), download: '', 'data-guest-path': a.guest_path || '' }, label)
            : label;
        return el('li', {}, link, ' ', el('span', { class: 'meta notice' }, '(' + info + ')'));
    });
    const missing = (x.missing || []).map((m) => el('li', { class: 'ev-error' },
        (m.path || String(m)) + ': ' + (m.error || 'missing')));
    return el('div', { class: 'extraction', 'data-id': x.id },
        el('h3', {}, fmtDateTime(x.created_at), ' · ', x.reason || 'request',
            x.source ? ' (' + x.source + ')' : ''),
        el('p', { class: 'notice' }, (x.paths || []).join(', '), ' · ', String(x.count ?? files.length), ' files, ',
            fmtBytes(x.bytes || 0), x.duration_ms ? ' · ' + fmtDuration(x.duration_ms) : ''),
        x.error ? el('p', { class: 'ev-error' }, x.error) : '',
        files.length ? el('ul', { class: 'artifact-list' }, files) : '',
        missing.length ? el('ul', { class: 'artifact-list' }, missing) : '');
}

let artifactsPending = null;
async function loadArtifacts() {
    if (artifactsPending)
        return artifactsPending;
    artifactsPending = (async () => {
        try {
            const r = await api('GET', base + '/artifacts');
            const list = r.extractions || [];
            $('artifacts').replaceChildren(...(list.length ? [...list].reverse().map(renderExtraction)
                : [el('p', { class: 'notice' }, 'No extraction yet.')]));
            showError($('artifacts-error'), null);
        } catch (e) {
            showError($('artifacts-error'), e, 'Cannot list artifacts');
        } finally {
            artifactsPending = null;
        }
    })();
    return artifactsPending;
}

/* ---------- diff ---------- */

function diffList(title, entries, mark) {
    return [el('h3', {}, title + ' (' + entries.length + ')'),
        entries.length ? el('ul', { class: 'diff-list' }, entries.map((e) => el('li', {},
            mark + ' ' + e.path, ' ', el('span', { class: 'notice' },
                [e.type, e.type === 'file' ? fmtBytes(e.size) : '', e.mode].filter(Boolean).join(', ')))))
            : el('p', { class: 'notice' }, 'none')];
}

async function runDiff(ev) {
    ev.preventDefault();
    const path = $('diff-path').value.trim();
    const progress = $('diff-progress');
    const text = $('diff-progress-text');
    const started = Date.now();
    $('diff-run').disabled = true;
    progress.hidden = false;
    $('diff-result').replaceChildren();
    showError($('diff-error'), null);
    text.textContent = 'Comparing ' + path + ' with the template (this takes about half a minute)…';
    const tick = setInterval(() => {
        text.textContent = 'Comparing ' + path + ' with the template… ' +
            Math.round((Date.now() - started) / 1000) + ' s';
    }, 1000);
    try {
        const d = await api('GET', base + '/diff?path=' + encodeURIComponent(path));
        $('diff-result').replaceChildren(
            el('p', { class: 'notice' }, 'Compared in ' + fmtDuration(Date.now() - started) + '.'),
            ...diffList('Added', d.added || [], '+'), ...diffList('Changed', d.changed || [], '~'),
            ...diffList('Removed', d.removed || [], '-'));
    } catch (e) {
        showError($('diff-error'), e, 'Diff failed');
    } finally {
        clearInterval(tick);
        progress.hidden = true;
        $('diff-run').disabled = false;
    }
}

/* ---------- start ---------- */

async function main() {
    if (!id) {
        showError(actionError, new Error('no session id in the address (session.html?id=ID)'));
        return;
    }
    me = await initHeader();
    if (isLeaving())
        return;
    for (const b of document.querySelectorAll('#controls button'))
        b.addEventListener('click', () => actions[b.dataset.action]());
    $('take-over').addEventListener('click', takeOver);
    $('release').addEventListener('click', release);
    $('reconnect').addEventListener('click', () => view.connect());
    $('terminal-open').addEventListener('click', () => terminal.open());
    $('terminal-close').addEventListener('click', () => terminal.close());
    $('diff-form').addEventListener('submit', runDiff);
    $('timeline-filter').addEventListener('change', filterTimeline);
    $('timeline-filters').addEventListener('submit', (e) => e.preventDefault());
    $('timeline').addEventListener('click', (e) => playFrom(e.target));
    try {
        setSession(await api('GET', base));
    } catch (e) {
        showError(actionError, e, 'Cannot load the session');
        return;
    }
    try {
        const c = await api('GET', base + '/control');
        setHolder(c.holder);
    } catch {
        // an older server without the lease: view only
    }
    if (session.state === 'running' || session.state === 'paused')
        view.connect();
    // Leaving the page closes the desktop's websockets instead of letting them break.
    window.addEventListener('pagehide', () => {
        view.stop();
        terminal.close();
    });
    // The recording first: the timeline's rows offer to play from them when it is on.
    await recording.load();
    await loadTimeline();
    loadArtifacts();
    const es = openStream('session=' + encodeURIComponent(session.id), {
        sessions: (d) => {
            const s = (d.sessions || []).find((x) => x.id === session.id);
            if (s && (s.state !== session.state || JSON.stringify(s.control) !== JSON.stringify(session.control)))
                setSession(s);
            else if (s)
                session = s;
        },
        approvals: (d) => setApprovalCount((d.approvals || []).filter((a) => !a.state || a.state === 'pending').length),
        timeline: (d) => addEvents(d.events),
    }, $('stream-status'));
    // Events between the first load and the stream's start are fetched once it is open.
    es.addEventListener('open', () => loadTimeline());
}

main();
