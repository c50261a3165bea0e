// Shared helpers of the console pages: API calls, DOM building, formatting, the live stream.
// The session cookie (HttpOnly) goes with every same-origin request; the token is never seen here.

export class ApiError extends Error {
    constructor(status, code, message) {
        super(message);
        this.status = status;
        this.code = code;
    }
}

// A local path to come back to after logging in: only paths on this origin.
export function safeNext(raw) {
    if (!raw || typeof raw !== 'string' || !raw.startsWith('/') || raw.startsWith('//') ||
        raw.startsWith('/\\'))
        return '/';
    try {
        const url = new URL(raw, location.origin);
        if (url.origin !== location.origin)
            return '/';
        return url.pathname + url.search + url.hash;
    } catch {
        return '/';
    }
}

let leaving = false;

// True once a 401 sent the browser to the login page: callers stop there.
export function isLeaving() {
    return leaving;
}

export function goLogin() {
    leaving = true;
    const next = location.pathname + location.search;
    location.assign('/login.html?next=' + encodeURIComponent(next));
}

async function errorFrom(resp) {
    let code = 'http_' + resp.status;
    let message = resp.statusText || ('HTTP ' + resp.status);
    try {
        const body = await resp.json();
        if (body && body.error) {
            code = body.error.code || code;
            message = body.error.message || message;
        }
    } catch {
        // not the error envelope: keep the status line
    }
    return new ApiError(resp.status, code, message);
}

// api('GET', '/v1/sessions') -> parsed JSON (null for 204). Throws ApiError; 401 goes to login.
export async function api(method, path, body, options = {}) {
    const init = {
        method,
        credentials: 'same-origin',
        headers: { Accept: 'application/json' },
        signal: options.signal,
    };
    if (body !== undefined) {
        init.headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
    }
    let resp;
    try {
        resp = await fetch(path, init);
    } catch (e) {
        if (e.name === 'AbortError')
            throw e;
        throw new ApiError(0, 'network', 'cannot reach carreld: ' + e.message);
    }
    if (resp.status === 401 && !options.noLoginRedirect) {
        goLogin();
        throw new ApiError(401, 'unauthorized', 'not logged in');
    }
    if (!resp.ok)
        throw await errorFrom(resp);
    if (resp.status === 204)
        return null;
    const type = resp.headers.get('Content-Type') || '';
    return type.includes('json') ? resp.json() : resp.text();
}

// el('a', {href: '/x', class: 'y'}, 'text', child...) -> element. Text is always text, never HTML.
export function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
        if (value === undefined || value === null || value === false)
            continue;
        if (key === 'class')
            node.className = value;
        else if (key === 'text')
            node.textContent = value;
        else if (key.startsWith('on') && typeof value === 'function')
            node.addEventListener(key.slice(2), value);
        else if (value === true)
            node.setAttribute(key, '');
        else
            node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) {
        if (child === undefined || child === null || child === false)
            continue;
        node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
}

// Shows an error in a role=alert container (or clears it with null).
export function showError(container, err, what) {
    container.replaceChildren();
    if (!err) {
        container.hidden = true;
        return;
    }
    container.hidden = false;
    const prefix = what ? what + ': ' : '';
    if (err instanceof ApiError)
        container.append(prefix, el('code', {}, err.code), ' ', err.message);
    else
        container.append(prefix + (err.message || String(err)));
}

export function sessionUrl(id) {
    return '/session.html?id=' + encodeURIComponent(id);
}

export function seg(value) {
    return encodeURIComponent(value);
}

export function parseTime(value) {
    if (!value)
        return null;
    const t = typeof value === 'number' ? new Date(value * 1000) : new Date(value);
    return Number.isNaN(t.getTime()) ? null : t;
}

export function fmtAge(value, now = Date.now()) {
    const t = parseTime(value);
    if (!t)
        return '';
    let s = Math.max(0, Math.round((now - t.getTime()) / 1000));
    if (s < 60)
        return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60)
        return m + ' min';
    const h = Math.floor(m / 60);
    if (h < 48)
        return h + ' h ' + (m % 60) + ' min';
    return Math.floor(h / 24) + ' d';
}

export function fmtTime(value) {
    const t = parseTime(value);
    if (!t)
        return '';
    return t.toLocaleTimeString(undefined, { hour12: false }) + '.' +
        String(t.getMilliseconds()).padStart(3, '0');
}

export function fmtDateTime(value) {
    const t = parseTime(value);
    return t ? t.toLocaleString(undefined, { hour12: false }) : '';
}

export function fmtDuration(ms) {
    if (ms === undefined || ms === null)
        return '';
    if (ms < 1000)
        return ms + ' ms';
    return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
}

export function fmtBytes(n) {
    if (n === undefined || n === null)
        return '';
    if (n < 1024)
        return n + ' B';
    const units = ['KiB', 'MiB', 'GiB'];
    let v = n / 1024;
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
        v /= 1024;
        i++;
    }
    return v.toFixed(1) + ' ' + units[i];
}

// Labels may come as an object {k: v} or an array of strings; both give "k=v" chips.
export function labelList(labels) {
    if (!labels)
        return [];
    if (Array.isArray(labels))
        return labels.map(String);
    if (typeof labels === 'object')
        return Object.entries(labels).map(([k, v]) => (v === '' || v === null ? k : k + '=' + v));
    return [String(labels)];
}

// The live stream: handlers {sessions, approvals, timeline} get the parsed data of each event.
// EventSource reconnects by itself; `status` (an element) says when the stream is down.
export function openStream(query, handlers, status) {
    const es = new EventSource('/v1/stream' + (query ? '?' + query : ''));
    window.addEventListener('pagehide', () => es.close());
    for (const [name, fn] of Object.entries(handlers)) {
        es.addEventListener(name, (ev) => {
            let data;
            try {
                data = JSON.parse(ev.data);
            } catch {
                return;
            }
            fn(data);
        });
    }
    es.addEventListener('open', () => {
        if (status)
            status.textContent = 'Live updates on.';
    });
    es.addEventListener('error', async () => {
        if (status)
            status.textContent = 'Live updates interrupted; reconnecting…';
        // A stream refused for want of a login looks the same as a network error: ask whoami.
        if (es.readyState === EventSource.CLOSED) {
            try {
                await api('GET', '/v1/whoami');
            } catch {
                // api() already went to the login page on 401
            }
        }
    });
    return es;
}

// The header's user name, log out button and pending-approvals count.
export async function initHeader() {
    const who = document.getElementById('whoami-name');
    const logout = document.getElementById('logout');
    let me = null;
    try {
        me = await api('GET', '/v1/whoami');
        if (who)
            who.textContent = me.name + ' (' + me.role + ')';
    } catch {
        // 401 already sent us to the login page
    }
    if (logout) {
        logout.addEventListener('click', async () => {
            try {
                await api('POST', '/v1/logout', {}, { noLoginRedirect: true });
            } finally {
                location.assign('/login.html');
            }
        });
    }
    return me;
}

export function setApprovalCount(n) {
    const count = document.getElementById('approval-count');
    if (!count)
        return;
    count.textContent = String(n);
    count.classList.toggle('zero', n === 0);
    const link = document.getElementById('approvals-link');
    if (link)
        link.setAttribute('aria-label', 'Approvals, ' + n + ' pending');
}
