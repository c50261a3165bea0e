// A stand-in for carreld's HTTP side, as the issue 7 contract describes it: static files with the
// CSP, login cookie, sessions, timeline, artifacts, diff, approvals, the live stream. No VM and no
// SPICE (the console's websocket is refused). For developing the pages and for pages.test.mjs.
//   node mock-server.mjs [PORT]   (prints "listening on http://127.0.0.1:PORT")
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const WEB_DIR = process.env.CARREL_WEB_DIR || join(HERE, '..', '..', 'web-console');
const SPICE_DIR = process.env.CARREL_SPICE_DIR || '/usr/share/spice-html5';
export const MOCK_TOKEN = 'mock-admin-token';
const COOKIE = 'carrel_session=mock-cookie-1';
const CSP = "default-src 'self'; img-src 'self' data: blob:; connect-src 'self' ws: wss:; " +
    "style-src 'self'; script-src 'self'";
const TYPES = {
    '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
    '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
    '.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon', '.json': 'application/json',
};

function iso(msAgo) {
    return new Date(Date.now() - msAgo).toISOString();
}

export function createMock() {
    const state = {
        sessions: [
            { id: 's-0a1b2c3d4e5f', name: 'agent-run-1', template: 'tiny', template_version: 1, state: 'running',
                vcpus: 1, memory_mib: 1024, origin: 'warm', created_at: iso(3600e3), updated_at: iso(60e3),
                labels: { task: 'invoice', team: 'ops' }, control: null },
            { id: 's-111122223333', name: 'nightly-check', template: 'desktop', template_version: 2, state: 'stopped',
                vcpus: 2, memory_mib: 2048, origin: 'cold', created_at: iso(86400e3 * 2), updated_at: iso(3600e3),
                control: null },
        ],
        events: [
            { seq: 1, time: iso(3500e3), actor: 'admin', kind: 'lifecycle', action: 'create', params: { template: 'tiny' },
                result: null, error: null, duration_ms: 5200, screenshot: null },
            { seq: 2, time: iso(3000e3), actor: 'agent', kind: 'action', action: 'type', params: { text: 'ls -l\n' },
                result: {}, error: null, duration_ms: 140, screenshot: 'shot-2.png' },
            { seq: 3, time: iso(2900e3), actor: 'agent', kind: 'command', action: 'exec', params: { argv: ['sh', '-c', 'exit 3'] },
                result: { exit_code: 3, stdout: '', stderr: 'x' }, error: null, duration_ms: 55, screenshot: null },
            { seq: 4, time: iso(2800e3), actor: 'agent', kind: 'file', action: 'read', params: { path: '/etc/shadow' },
                result: null, error: 'permission denied', duration_ms: 9, screenshot: null },
            // A person's own input on the console (actor_kind person), as carreld records it.
            { seq: 5, time: iso(2700e3), actor: 'alice', actor_kind: 'person', kind: 'console', action: 'click',
                params: { x: 412, y: 300, button: 'left' }, result: null, error: null, duration_ms: 0, screenshot: null },
            { seq: 6, time: iso(2690e3), actor: 'alice', actor_kind: 'person', kind: 'console', action: 'keys',
                params: { combo: 'ctrl+c' }, result: null, error: null, duration_ms: 0, screenshot: null },
            { seq: 7, time: iso(2680e3), actor: 'alice', actor_kind: 'person', kind: 'console', action: 'type',
                params: { redacted: true, chars: 5 }, result: null, error: null, duration_ms: 800, screenshot: null },
        ],
        // The recording of the first session: 'on', 'off' (enabled false) or 'absent' (404).
        recordingMode: 'on',
        recording: {
            enabled: true, fps: 2, dropped: 0,
            segments: [
                { name: 'seg-000001.webm', started_ms: 0, ended_ms: 60000, duration_ms: 60000, frames: 120, bytes: 48213,
                    sha256: 'aa'.repeat(32) },
                { name: 'seg-000002.webm', started_ms: 60000, ended_ms: 75000, duration_ms: 15000, frames: 30, bytes: 9120,
                    sha256: 'bb'.repeat(32), open: true },
            ],
            events: [
                { seq: 2, segment: 'seg-000001.webm', offset_ms: 1500 },
                { seq: 5, segment: 'seg-000001.webm', offset_ms: 40250 },
                { seq: 6, segment: 'seg-000002.webm', offset_ms: 12345 },
            ],
        },
        extractions: [],
        approvals: [
            { id: 'a-1', session_id: 's-0a1b2c3d4e5f', action: 'file_download', detail: { url: 'https://example.com/x.pdf' },
                state: 'pending', requested_at: iso(120e3), decided_at: null, decided_by: null, reason: null },
            { id: 'a-0', session_id: 's-0a1b2c3d4e5f', action: 'exec', detail: { argv: ['rm', '-rf', '/tmp/x'] },
                state: 'denied', requested_at: iso(900e3), decided_at: iso(800e3), decided_by: 'admin', reason: 'no' },
        ],
        snapshots: [{ id: 'snap-1', name: 'before-login', memory: true, created_at: iso(2000e3) }],
        streams: new Set(),
        seq: 7,
        log: [],
        shotQueries: [], // the query of every GET .../screenshot, as carreld would see it
        webm: null, // the bytes of every recording segment, when a test made a real video
    };

    function send(res, status, body, headers = {}) {
        const data = body === undefined ? '' : JSON.stringify(body);
        res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-Id': 'mock', ...headers });
        res.end(data);
    }
    function err(res, status, code, message) {
        send(res, status, { error: { code, message } });
    }
    function push(event, data, sessionId) {
        for (const s of state.streams) {
            if (event === 'timeline' && s.session !== sessionId)
                continue;
            s.res.write('event: ' + event + '\ndata: ' + JSON.stringify(data) + '\n\n');
        }
    }
    function addEvent(sessionId, kind, action, params, result, error) {
        const ev = { seq: ++state.seq, time: new Date().toISOString(), actor: 'admin', kind, action, params,
            result, error: error || null, duration_ms: 12, screenshot: null };
        state.events.push(ev);
        push('timeline', { events: [ev] }, sessionId);
    }
    function pendingApprovals() {
        return state.approvals.filter((a) => a.state === 'pending');
    }
    function changed() {
        push('sessions', { sessions: state.sessions });
    }
    async function body(req) {
        const chunks = [];
        for await (const c of req)
            chunks.push(c);
        const text = Buffer.concat(chunks).toString();
        return text ? JSON.parse(text) : {};
    }
    function authed(req) {
        return (req.headers.cookie || '').split(/;\s*/).includes(COOKIE) ||
            req.headers.authorization === 'Bearer ' + MOCK_TOKEN;
    }

    async function serveFile(res, root, rel) {
        const path = normalize(join(root, rel));
        if (!path.startsWith(normalize(root)))
            return err(res, 404, 'not_found', 'no such file');
        try {
            const data = await readFile(path);
            res.writeHead(200, { 'Content-Type': TYPES[extname(path)] || 'application/octet-stream',
                'Content-Security-Policy': CSP, 'X-Content-Type-Options': 'nosniff' });
            res.end(data);
        } catch {
            err(res, 404, 'not_found', 'no such file');
        }
    }

    async function handle(req, res) {
        const url = new URL(req.url, 'http://x');
        const p = url.pathname;
        state.log.push(req.method + ' ' + p);
        if (!p.startsWith('/v1/')) {
            if (p.startsWith('/spice-html5/'))
                return serveFile(res, SPICE_DIR, p.slice('/spice-html5/'.length));
            return serveFile(res, WEB_DIR, p === '/' ? 'index.html' : p.slice(1));
        }
        if (p === '/v1/login' && req.method === 'POST') {
            const b = await body(req);
            if (b.token !== MOCK_TOKEN)
                return err(res, 401, 'unauthorized', 'invalid token');
            return send(res, 200, { name: 'admin', role: 'admin' },
                { 'Set-Cookie': COOKIE + '; HttpOnly; SameSite=Strict; Path=/' });
        }
        if (!authed(req))
            return err(res, 401, 'unauthorized', 'no token');
        if (p === '/v1/logout')
            return send(res, 204, undefined, { 'Set-Cookie': 'carrel_session=; Max-Age=0; Path=/' });
        if (p === '/v1/whoami')
            return send(res, 200, { name: 'admin', role: 'admin' });
        if (p === '/v1/stream') {
            res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
            const s = { res, session: url.searchParams.get('session') };
            state.streams.add(s);
            req.on('close', () => state.streams.delete(s));
            res.write('event: sessions\ndata: ' + JSON.stringify({ sessions: state.sessions }) + '\n\n');
            res.write('event: approvals\ndata: ' + JSON.stringify({ approvals: pendingApprovals() }) + '\n\n');
            return undefined;
        }
        if (p === '/v1/sessions')
            return send(res, 200, { sessions: state.sessions });
        if (p === '/v1/approvals') {
            const all = url.searchParams.get('state') === 'all';
            return send(res, 200, { approvals: all ? state.approvals : pendingApprovals() });
        }
        let m = p.match(/^\/v1\/approvals\/([^/]+)\/(approve|deny)$/);
        if (m) {
            const a = state.approvals.find((x) => x.id === m[1]);
            if (!a)
                return err(res, 404, 'not_found', `approval '${m[1]}' does not exist`);
            if (a.state !== 'pending')
                return err(res, 409, 'wrong_state', `approval '${a.id}' is already ${a.state}`);
            const b = await body(req);
            Object.assign(a, { state: m[2] === 'approve' ? 'approved' : 'denied', decided_at: new Date().toISOString(),
                decided_by: 'admin', reason: b.reason || null });
            push('approvals', { approvals: pendingApprovals() });
            return send(res, 200, a);
        }
        m = p.match(/^\/v1\/artifacts\/([^/]+)$/);
        if (m) {
            res.writeHead(200, { 'Content-Type': 'application/octet-stream',
                'Content-Disposition': 'attachment; filename="out.txt"' });
            return res.end('artifact ' + m[1] + '\n');
        }
        m = p.match(/^\/v1\/sessions\/([^/]+)(?:\/(.+))?$/);
        if (!m)
            return err(res, 404, 'not_found', 'no such route');
        const s = state.sessions.find((x) => x.id === m[1] || x.name === m[1]);
        if (!s)
            return err(res, 404, 'not_found', `session '${m[1]}' does not exist`);
        const sub = m[2] || '';
        const verbs = { pause: ['running', 'paused'], resume: ['paused', 'running'], hibernate: ['running', 'hibernated'],
            stop: [null, 'stopped'], start: ['stopped', 'running'] };
        if (req.method === 'POST' && verbs[sub]) {
            const [from, to] = verbs[sub];
            if ((from && s.state !== from && !(sub === 'resume' && s.state === 'hibernated')) ||
                (sub === 'stop' && !['running', 'paused'].includes(s.state)))
                return err(res, 409, 'wrong_state', `session '${s.id}' is ${s.state}`);
            s.state = to;
            addEvent(s.id, 'lifecycle', sub, {}, null);
            changed();
            return send(res, 200, s);
        }
        if (sub === '' && req.method === 'GET')
            return send(res, 200, s);
        if (sub === '' && req.method === 'DELETE') {
            s.state = 'destroyed';
            changed();
            return send(res, 200, s);
        }
        if (sub === 'control') {
            if (req.method === 'GET')
                return send(res, 200, s.control ? s.control : { holder: null });
            const b = await body(req);
            s.control = b.action === 'take' ? { holder: 'admin', since: new Date().toISOString() } : null;
            addEvent(s.id, 'control', b.action, {}, null);
            changed();
            return send(res, 200, s.control || { holder: null });
        }
        if (sub === 'console')
            return send(res, 200, { ticket: 'mock-ticket', url: '/v1/console/mock-ticket',
                expires_at: new Date(Date.now() + 10e3).toISOString(), view_only: !s.control });
        if (sub === 'events') {
            const after = Number(url.searchParams.get('after') || 0);
            return send(res, 200, { events: s.id === state.sessions[0].id ? state.events.filter((e) => e.seq > after) : [] });
        }
        if (sub === 'recording') {
            if (s.id !== state.sessions[0].id || state.recordingMode === 'absent')
                return err(res, 404, 'not_found', `session '${s.id}' has no recording`);
            if (state.recordingMode === 'off')
                return send(res, 200, { enabled: false, fps: 0, segments: [], dropped: 0, events: [] });
            return send(res, 200, state.recording);
        }
        m = sub.match(/^recording\/([^/]+)$/);
        if (m) {
            if (!state.recording.segments.some((x) => x.name === m[1]))
                return err(res, 404, 'not_found', `no segment '${m[1]}'`);
            // A real WebM when the test made one (state.webm), else only its first bytes: the
            // page's player is then tested by what it asks for and where it seeks.
            const bytes = state.webm || Buffer.from([0x1a, 0x45, 0xdf, 0xa3]);
            const headers = { 'Content-Type': 'video/webm', 'Accept-Ranges': 'bytes',
                'Content-Disposition': 'attachment; filename="' + m[1] + '"' };
            // Byte ranges, as a media server answers them: a player seeks only with them.
            const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
            if (range && Number(range[1]) < bytes.length) {
                const from = Number(range[1]);
                const to = Math.min(range[2] ? Number(range[2]) : bytes.length - 1, bytes.length - 1);
                res.writeHead(206, { ...headers, 'Content-Length': to - from + 1,
                    'Content-Range': 'bytes ' + from + '-' + to + '/' + bytes.length });
                return res.end(bytes.subarray(from, to + 1));
            }
            res.writeHead(200, { ...headers, 'Content-Length': bytes.length });
            return res.end(bytes);
        }
        if (sub === 'snapshots' && req.method === 'GET')
            return send(res, 200, { snapshots: state.snapshots });
        if (sub === 'snapshots') {
            const b = await body(req);
            const snap = { id: 'snap-' + (state.snapshots.length + 1), name: b.name, memory: true, created_at: new Date().toISOString() };
            state.snapshots.push(snap);
            addEvent(s.id, 'lifecycle', 'snapshot', { name: b.name }, null);
            return send(res, 201, snap);
        }
        if (sub === 'revert') {
            const b = await body(req);
            addEvent(s.id, 'lifecycle', 'revert', { snapshot: b.snapshot }, null);
            return send(res, 200, s);
        }
        if (sub === 'artifacts' && req.method === 'GET')
            return send(res, 200, { extractions: state.extractions });
        if (sub === 'artifacts') {
            const b = await body(req);
            const n = state.extractions.length + 1;
            const x = { id: 'x-' + n, session_id: s.id, reason: 'request', source: 'agent', paths: b.paths,
                missing: [{ path: '/nope', error: 'no such file' }], error: null, bytes: 12, count: 1,
                duration_ms: 900, created_at: new Date().toISOString(),
                artifacts: [{ id: 'f-' + n, guest_path: b.paths[0] + '/out.txt', path: 'out.txt', type: 'file', size: 12,
                    mode: '0644', sha256: 'ab' }] };
            state.extractions.push(x);
            addEvent(s.id, 'artifacts', 'extract', { paths: b.paths }, { count: 1 });
            return send(res, 201, x);
        }
        if (sub === 'diff') {
            await new Promise((r) => setTimeout(r, 2500));
            return send(res, 200, { added: [{ path: '/home/user/new.txt', type: 'file', size: 10, mode: '0644' }],
                changed: [{ path: '/home/user/.bash_history', type: 'file', size: 300, mode: '0600' }], removed: [] });
        }
        if (sub === 'screenshot') {
            state.shotQueries.push(url.search);
            // As carreld: a screenshot is a timeline event unless it is a viewer's thumbnail.
            if (url.searchParams.get('thumbnail') !== '1')
                addEvent(s.id, 'action', 'screenshot', null, null);
        }
        if (sub === 'screenshot' || sub.startsWith('screenshots/')) {
            const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="320" height="240"><rect width="320" height="240" fill="#3a6ea5"/>` +
                `<rect x="20" y="20" width="280" height="180" fill="#000"/><text x="30" y="50" fill="#0f0" font-size="16">${s.name} ${new Date().toISOString().slice(11, 19)}</text></svg>`;
            res.writeHead(200, { 'Content-Type': 'image/svg+xml' });
            return res.end(svg);
        }
        return err(res, 404, 'not_found', 'no such route');
    }

    const server = createServer((req, res) => {
        handle(req, res).catch((e) => err(res, 500, 'internal', e.message));
    });
    return { server, state, push, changed };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
    const { server } = createMock();
    server.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
        console.log('listening on http://127.0.0.1:' + server.address().port + ' (token: ' + MOCK_TOKEN + ')');
    });
}
