// Take-overs in a real browser, again and again: a reviewer opens the session page, takes over,
// types into the guest's terminal, and closes the browser without releasing; then a new browser
// does the same, a third time, after a pause and after a hibernate. Each round's typing is read
// back from the guest with exec, and the timeline holds the person's click (near where it was
// made), key combination and redacted typing, named (issue 19). Prints `ok - ...` /
// `not ok - ...`; exits 1 on any failure.
//
// Environment: as console.test.mjs (CARREL_URL, CARREL_TOKEN_FILE, CARREL_SESSION of a running
// `tiny` session, CARREL_TEST_OUT, CHROMIUM).
import { agentOf, env, login, realProblems, typeKeys, waitConsole } from './carrel.mjs';
import { check, fail, launch, shot, sleep, step, summary, waitFor, watchProblems } from './lib.mjs';

const { base: BASE, sid: SID, token: TOKEN } = await env();
const { agent, guestExec, sessionState } = agentOf({ base: BASE, sid: SID, token: TOKEN });

async function waitState(want, timeoutMs) {
    return waitFor(async () => ((await sessionState()) === want ? want : null), timeoutMs, 500);
}

// The guest's xterm (its frame, in guest pixels) from the computer API's window list.
async function xtermWindow() {
    const r = await agent('POST', '/v1/sessions/' + SID + '/computer', { action: 'windows' });
    const j = r.json || {};
    const out = j.output || (j.results && j.results[0] && j.results[0].output) || {};
    const list = out.windows || [];
    if (!list.length)
        console.log('# windows: ' + r.status + ' ' + r.text.slice(0, 300));
    return list.find((w) => /xterm/i.test(w.class || '') || /xterm/i.test(w.instance || '')) || null;
}

// Where the xterm is, asked once before any take-over (agents' calls wait while a person holds
// the lease, and the terminal does not move).
let terminal = null;

// Clicks the middle of the guest's xterm on the page's canvas, as a person would before typing.
async function clickTerminal(page) {
    const w = terminal;
    if (!w)
        throw new Error('no xterm in the window list');
    // 'connected' is the main channel's; the canvas comes with the display channel's first
    // surface, later on a loaded host.
    await page.waitForSelector('#spice-screen canvas', { timeout: 30000 });
    const box = await page.evaluate(() => {
        const c = document.querySelector('#spice-screen canvas');
        const r = c.getBoundingClientRect();
        return { left: r.left, top: r.top, width: r.width, height: r.height, cw: c.width, ch: c.height };
    });
    const gx = w.x + w.width / 2;
    const gy = w.y + w.height / 2;
    await page.mouse.move(box.left + (gx * box.width) / box.cw, box.top + (gy * box.height) / box.ch, { steps: 5 });
    await page.mouse.click(box.left + (gx * box.width) / box.cw, box.top + (gy * box.height) / box.ch);
    return { x: gx, y: gy };
}

// The newest seq of the session's timeline (paged: a long run has many events).
async function lastSeq() {
    let after = 0;
    for (;;) {
        const r = await agent('GET', '/v1/sessions/' + SID + '/events?after=' + after + '&limit=1000');
        const list = (r.json && r.json.events) || [];
        if (!list.length)
            return after;
        after = list[list.length - 1].seq;
        if (list.length < 1000)
            return after;
    }
}

// The person's own events (actor_kind person) after seq.
async function personEvents(after) {
    const r = await agent('GET', '/v1/sessions/' + SID + '/events?after=' + after + '&limit=1000');
    return ((r.json && r.json.events) || []).filter((e) => e.actor_kind === 'person');
}

// issue 19: what the person did is on the timeline, named: the click near where it was made,
// the key combination, and the typed text redacted (the default policy keeps no typed text).
async function checkPersonTimeline(round, after, clicked, typed) {
    const me = (await agent('GET', '/v1/whoami')).json || {};
    await step(round + ': the timeline holds the person\'s click, combination and redacted typing, named', async () => {
        // A pause of a second in the typing (a loaded host) ends one type event and begins
        // the next: the characters of them all are the typed line's.
        const typedChars = (evs) => evs.filter((e) => e.action === 'type')
            .reduce((n, e) => n + ((e.params && e.params.chars) || 0), 0);
        const list = await waitFor(async () => {
            const evs = await personEvents(after);
            return typedChars(evs) >= typed.length ? evs : null;
        }, 10000, 500) || await personEvents(after);
        const line = JSON.stringify(list).slice(0, 600);
        const click = list.find((e) => e.kind === 'console' && e.action === 'click' && e.params && e.params.button === 'left');
        if (!click || Math.abs(click.params.x - clicked.x) > 4 || Math.abs(click.params.y - clicked.y) > 4)
            throw new Error('no left click near ' + JSON.stringify(clicked) + ': ' + line);
        if (!list.some((e) => e.action === 'keys' && e.params && e.params.combo === 'ctrl+l'))
            throw new Error('no keys ctrl+l: ' + line);
        const types = list.filter((e) => e.action === 'type');
        if (!types.length || typedChars(types) !== typed.length ||
            !types.every((e) => e.params.redacted === true && !('text' in e.params)))
            throw new Error('typing not redacted as ' + typed.length + ' characters: ' + line);
        if (!list.every((e) => e.actor === me.name))
            throw new Error('not all named ' + me.name + ': ' + line);
        if (JSON.stringify(list).includes(typed))
            throw new Error('the typed text is on the timeline: ' + line);
    });
}

// What a page asked for and was told, with times from its visit's start: printed (as `# `
// lines) when the page does not connect, to say where it stopped.
function tracePage(page) {
    const t0 = Date.now();
    const lines = [];
    const at = () => String(Date.now() - t0).padStart(6) + ' ms ';
    const path = (u) => u.replace(/^https?:\/\/[^/]+/, '');
    // The API's requests; static files only when they fail (a page has forty of them).
    const api = (u) => path(u).startsWith('/v1/');
    page.on('request', (r) => api(r.url()) && lines.push(at() + '-> ' + r.method() + ' ' + path(r.url())));
    page.on('response', (r) => (api(r.url()) || r.status() >= 400) &&
        lines.push(at() + '<- ' + r.status() + ' ' + path(r.url())));
    page.on('requestfailed', (r) => lines.push(at() + 'x  ' + path(r.url()) + ' ' +
        ((r.failure() && r.failure().errorText) || '')));
    page.on('console', (m) => lines.push(at() + 'console.' + m.type() + ': ' + m.text().slice(0, 200)));
    page.on('pageerror', (e) => lines.push(at() + 'pageerror: ' + e.message));
    page.on('framenavigated', (f) => {
        if (f === page.mainFrame())
            lines.push(at() + 'navigated to ' + path(f.url()));
    });
    return lines;
}

function printTrace(round, page, lines) {
    console.log('# ' + round + ': the page at ' + page.url() + ' (' + lines.length + ' events, last 60):');
    for (const line of lines.slice(-60))
        console.log('#   ' + line);
}

// What the page shows: its console state, status line and error banner.
async function pageState(page) {
    return page.evaluate(() => document.body.dataset.console + ': ' +
        (document.getElementById('console-status') || {}).textContent + ' | ' +
        ((document.getElementById('action-error') || {}).textContent || '').trim())
        .catch((x) => x.message);
}

// Rounds whose page needed a reload to connect.
const reloads = [];

// TRUE once the page's console is connected (60 s at most); else prints where it stopped.
async function connects(page, label, trace) {
    try {
        await page.waitForFunction(() => document.body.dataset.console === 'connected', null, { timeout: 60000 });
        return true;
    } catch (e) {
        console.log('# ' + label + ': not connected after 60 s (page: ' + (await pageState(page)) +
            '; session ' + (await sessionState()) + ')');
        await shot(page, 'takeover-' + label.replace(/\W+/g, '-') + '-not-connected');
        printTrace(label, page, trace);
        return false;
    }
}

// One reviewer's visit in a browser of its own: log in, open the page, take over (unless the
// page says the lease is already theirs), click into the terminal, type a command, read its
// effect back in the guest; then leave as asked: close the browser, or release first.
async function visit(browser, round, problems, { release = false } = {}) {
    const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
    const page = await context.newPage();
    watchProblems(page, problems);
    const trace = tracePage(page);
    const file = '/tmp/takeover-' + round;
    try {
        await login(page, BASE, TOKEN);
        await page.goto(BASE + '/session.html?id=' + encodeURIComponent(SID));
        await step(round + ': the page connects to the desktop', async () => {
            if (await connects(page, round, trace))
                return;
            // Two CI runs saw a page that never began to connect after the hibernate, and no
            // run here did: what it asked for is printed above, and the page is reloaded once,
            // as a person would; a second miss fails.
            console.log('# ' + round + ': reloading the page once');
            reloads.push(round);
            await page.reload();
            if (!(await connects(page, round + ' (reloaded)', trace)))
                throw new Error('the page did not connect, nor after a reload (page: ' +
                    (await pageState(page)) + '; session ' + (await sessionState()) + ')');
        });
        await step(round + ': take over: the page says you control the desktop', async () => {
            if (await page.isVisible('#take-over'))
                await page.click('#take-over');
            await page.waitForFunction(() => /You control/.test(document.getElementById('control-badge').textContent),
                null, { timeout: 15000 });
            await waitConsole(page, false);
        });
        await guestExec(['rm', '-f', file]);
        const after = await lastSeq();
        let clicked = null;
        const typed = 'echo ' + round + ' > ' + file;
        await step(round + ': keys typed into the page reach the terminal (read back with exec)', async () => {
            clicked = await clickTerminal(page);
            await page.locator('#spice-screen canvas').focus();
            // A combination first (xterm's clear screen), then the command.
            await page.keyboard.press('Control+KeyL', { delay: 20 });
            await sleep(200);
            await typeKeys(page, typed + '\n');
            const got = await waitFor(async () => {
                const r = await guestExec(['cat', file]);
                return r.exit_code === 0 && r.stdout.trim() ? r.stdout.trim() : null;
            }, 20000, 500);
            if (got !== round)
                throw new Error(file + ' holds ' + JSON.stringify(got));
        });
        if (clicked)
            await checkPersonTimeline(round, after, clicked, typed);
        await shot(page, 'takeover-' + round);
        if (release) {
            await step(round + ': release from the page', async () => {
                await page.click('#release');
                await page.waitForFunction(() => /^View only$/.test(document.getElementById('control-badge').textContent),
                    null, { timeout: 15000 });
            });
        }
    } finally {
        // The browser goes away as a person closes it: no release.
        await context.close();
    }
}

const browser = await launch();
const problems = [];
try {
    if ((await sessionState()) !== 'running')
        throw new Error('session ' + SID + ' is not running');
    terminal = await xtermWindow();
    check('the guest has an xterm to type into', terminal, JSON.stringify(terminal));
    await visit(browser, 'first', problems);
    await visit(browser, 'second', problems, { release: true });
    // A person reopens the browser later than the proxy's grace for the old connections.
    await sleep(12000);
    await visit(browser, 'third', problems);
    await visit(browser, 'fourth', problems, { release: true });
    await step('pause and resume through the API', async () => {
        const p = await agent('POST', '/v1/sessions/' + SID + '/pause', {});
        if (p.status !== 200 && p.status !== 409)
            throw new Error('pause: ' + p.status + ' ' + p.text);
        if (!(await waitState('paused', 30000)))
            throw new Error('not paused: ' + (await sessionState()));
        const r = await agent('POST', '/v1/sessions/' + SID + '/resume', {});
        if (r.status !== 200 && r.status !== 202)
            throw new Error('resume: ' + r.status + ' ' + r.text);
        return !!(await waitState('running', 60000));
    });
    await visit(browser, 'after-pause', problems);
    await step('hibernate and resume through the API', async () => {
        const h = await agent('POST', '/v1/sessions/' + SID + '/hibernate', {});
        if (h.status !== 200 && h.status !== 202)
            throw new Error('hibernate: ' + h.status + ' ' + h.text);
        if (!(await waitState('hibernated', 120000)))
            throw new Error('not hibernated: ' + (await sessionState()));
        const r = await agent('POST', '/v1/sessions/' + SID + '/resume', {});
        if (r.status !== 200 && r.status !== 202)
            throw new Error('resume: ' + r.status + ' ' + r.text);
        return !!(await waitState('running', 120000));
    });
    await visit(browser, 'after-hibernate', problems);
    if (reloads.length)
        console.log('# pages that connected only after a reload: ' + reloads.join(', '));
    const real = realProblems(problems);
    check('no script error in the pages', real.length === 0, real.join(' | '));
} catch (e) {
    fail('take-over test stopped', e.stack);
} finally {
    await agent('POST', '/v1/sessions/' + SID + '/control', { action: 'release' }).catch(() => {});
    await browser.close();
}
process.exit(summary());
