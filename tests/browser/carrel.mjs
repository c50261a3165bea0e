// What the console browser tests share about carreld and the guest: the API as an agent uses it
// (bearer token, no cookie), the page's login, the SPICE canvas and typing into it.
import { readFile } from 'node:fs/promises';
import { sleep } from './lib.mjs';

const KEY_DELAY_MS = 60; // MACHINE.md: keys faster than ~50 ms apart get dropped after 8

// env(): CARREL_URL, CARREL_TOKEN_FILE and CARREL_SESSION, or an exit with a "not ok" line.
export async function env() {
    const base = (process.env.CARREL_URL || '').replace(/\/$/, '');
    const sid = process.env.CARREL_SESSION;
    if (!base || !sid || !process.env.CARREL_TOKEN_FILE) {
        console.log('not ok - CARREL_URL, CARREL_TOKEN_FILE and CARREL_SESSION must be set');
        process.exit(1);
    }
    const token = (await readFile(process.env.CARREL_TOKEN_FILE, 'utf8')).trim();
    return { base, sid, token };
}

// An agent's view of one session: agent(method, path, body), guestExec(argv), sessionState().
export function agentOf({ base, sid, token }) {
    async function agent(method, path, body) {
        const resp = await fetch(base + path, {
            method,
            headers: { Authorization: 'Bearer ' + token, ...(body ? { 'Content-Type': 'application/json' } : {}) },
            body: body ? JSON.stringify(body) : undefined,
        });
        const text = await resp.text();
        let json = null;
        try {
            json = JSON.parse(text);
        } catch {
            // not JSON
        }
        return { status: resp.status, json, text };
    }
    async function guestExec(argv) {
        const r = await agent('POST', '/v1/sessions/' + sid + '/exec', { argv });
        if (r.status !== 200)
            throw new Error('exec ' + argv.join(' ') + ': ' + r.status + ' ' + r.text);
        return r.json;
    }
    async function sessionState() {
        const r = await agent('GET', '/v1/sessions/' + sid);
        return r.json && r.json.state;
    }
    return { agent, guestExec, sessionState };
}

// Logs a fresh page in through the login page with the token (the cookie it sets is the page's).
export async function login(page, base, token) {
    await page.goto(base + '/');
    await page.waitForURL(/\/login\.html\?next=/, { timeout: 10000 });
    await page.fill('#token', token);
    await page.click('#login-submit');
    await page.waitForURL(base + '/', { timeout: 10000 });
}

// Pixel statistics of the SPICE canvas, read in the page.
export async function canvasStats(page) {
    return page.evaluate(() => {
        const c = document.querySelector('#spice-screen canvas');
        if (!c || !c.width || !c.height)
            return null;
        const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const colours = new Set();
        let hash = 0;
        let lit = 0;
        for (let i = 0; i < data.length; i += 4) {
            const v = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
            if (colours.size < 4096)
                colours.add(v);
            if (v !== 0)
                lit++;
            hash = (Math.imul(hash, 31) + v) | 0;
        }
        return { width: c.width, height: c.height, colours: colours.size, lit, hash };
    });
}

// Types text into the focused canvas with real key presses, paced; shifted characters are sent
// with Shift held (spice-html5 sends scancodes: the key's code, not its character).
const SHIFTED = { '>': 'Period', '<': 'Comma', '_': 'Minus', '|': 'Backslash', '~': 'Backquote', ':': 'Semicolon',
    '"': 'Quote', '?': 'Slash', '+': 'Equal', '!': 'Digit1', '@': 'Digit2', '#': 'Digit3', '$': 'Digit4',
    '%': 'Digit5', '^': 'Digit6', '&': 'Digit7', '*': 'Digit8', '(': 'Digit9', ')': 'Digit0', '{': 'BracketLeft',
    '}': 'BracketRight' };
const PLAIN = { ' ': 'Space', '.': 'Period', ',': 'Comma', '-': 'Minus', '/': 'Slash', '=': 'Equal', ';': 'Semicolon',
    "'": 'Quote', '\\': 'Backslash', '`': 'Backquote', '[': 'BracketLeft', ']': 'BracketRight', '\n': 'Enter' };
export async function typeKeys(page, text) {
    for (const ch of text) {
        let key;
        if (/[a-z]/.test(ch))
            key = 'Key' + ch.toUpperCase();
        else if (/[A-Z]/.test(ch))
            key = 'Shift+Key' + ch;
        else if (/[0-9]/.test(ch))
            key = 'Digit' + ch;
        else if (SHIFTED[ch])
            key = 'Shift+' + SHIFTED[ch];
        else if (PLAIN[ch])
            key = PLAIN[ch];
        else
            throw new Error('no key for ' + JSON.stringify(ch));
        await page.keyboard.press(key, { delay: 20 });
        await sleep(KEY_DELAY_MS);
    }
}

// The page problems that are not the page's: failed loads and websocket closes the browser
// logs, and the bare websocket error Event that spice-html5 throws (report_error) from a
// display, inputs or cursor channel that has no error handler when its websocket fails while a
// connection is replaced (take over, release). Any other script error stays a problem.
export function realProblems(problems) {
    return problems.filter((p) => !/Failed to load resource|WebSocket connection to/.test(p) &&
        !/^pageerror: Event \[during: /.test(p));
}

// 60 s: with the e2e halves side by side on two cores, a console once took over 30 s to connect.
export async function waitConsole(page, viewOnly, timeout = 60000) {
    await page.waitForFunction((vo) => document.body.dataset.console === 'connected' &&
        document.body.dataset.viewOnly === String(vo), viewOnly, { timeout });
}
