// Browser test of the review console against a real carreld and a running `tiny` session, in
// Debian's headless Chromium. Prints `ok - ...` / `not ok - ...` lines; exits 1 on any failure.
//
// Environment:
//   CARREL_URL         http://127.0.0.1:PORT of carreld (--listen)
//   CARREL_TOKEN_FILE  the admin token file
//   CARREL_SESSION     id of a running `tiny` session (X, twm, a focused xterm, guest agent)
//   CARREL_TEST_OUT    where page screenshots go (not the repo)
//   CHROMIUM           the browser (default /usr/bin/chromium)
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { agentOf, canvasStats, env, realProblems, typeKeys, waitConsole } from './carrel.mjs';
import { check, fail, launch, outDir, shot, sleep, step, summary, waitFor, watchProblems } from './lib.mjs';

const { base: BASE, sid: SID, token: TOKEN } = await env();
const WS_BASE = BASE.replace(/^http/, 'ws');
const { agent, guestExec, sessionState } = agentOf({ base: BASE, sid: SID, token: TOKEN });

// Opens a websocket from inside a page; 'accepted' when it opened and stayed open 3 s,
// 'refused' when it never opened or was closed within that time.
async function wsProbe(page, url) {
    return page.evaluate((u) => new Promise((resolve) => {
        let opened = false;
        let ws;
        try {
            ws = new WebSocket(u, ['binary']);
        } catch (e) {
            resolve('refused (' + e.message + ')');
            return;
        }
        ws.binaryType = 'arraybuffer';
        const timer = setTimeout(() => {
            resolve(opened ? 'accepted' : 'refused (no answer)');
            ws.close();
        }, 3000);
        ws.onopen = () => { opened = true; };
        ws.onclose = (e) => {
            clearTimeout(timer);
            resolve('refused (' + (opened ? 'closed after open' : 'never opened') + ', code ' + e.code + ')');
        };
    }), url);
}

// A console ticket asked for by the logged-in page (its cookie).
async function pageTicket(page) {
    return page.evaluate(async (sid) => {
        const r = await fetch('/v1/sessions/' + encodeURIComponent(sid) + '/console', {
            method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: '{}',
        });
        return { status: r.status, body: await r.json() };
    }, SID).then((t) => {
        // Without a ticket the refusal checks below would prove nothing.
        if (t.status !== 200 || !t.body || typeof t.body.url !== 'string' || !t.body.expires_at)
            throw new Error('POST .../console gave no ticket: ' + t.status + ' ' + JSON.stringify(t.body));
        return t;
    });
}

// A second origin for the cross-origin checks: a page on another port of 127.0.0.1.
const foreign = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<!doctype html><title>elsewhere</title><p>another origin</p>');
});
await new Promise((r) => foreign.listen(0, '127.0.0.1', r));
const FOREIGN = 'http://127.0.0.1:' + foreign.address().port;

console.log('# carreld ' + BASE + ', session ' + SID + ', screenshots in ' + outDir());
const browser = await launch();
const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, acceptDownloads: true });
const page = await context.newPage();
const problems = watchProblems(page, []);
const pageTickets = []; // the console URLs the page itself was given, in order
page.on('response', async (r) => {
    if (r.request().method() === 'POST' && /\/v1\/sessions\/[^/]+\/console$/.test(new URL(r.url()).pathname)) {
        try {
            pageTickets.push((await r.json()).url);
        } catch {
            // not a ticket
        }
    }
});
let me = null;
let holding = false;

try {
    const st = await sessionState();
    if (st !== 'running')
        throw new Error('session ' + SID + ' is ' + st + ', not running');

    /* ---- login, list, open ---- */
    await step('without a cookie the console sends the browser to the login page', async () => {
        await page.goto(BASE + '/');
        await page.waitForURL(/\/login\.html\?next=/, { timeout: 10000 });
    });
    await shot(page, 'login');
    await step('log in through the login page with the admin token', async () => {
        await page.fill('#token', TOKEN);
        await page.click('#login-submit');
        await page.waitForURL(BASE + '/', { timeout: 10000 });
    });
    check('the token is not in the address bar', !page.url().includes(TOKEN));
    me = await page.evaluate(async () => (await fetch('/v1/whoami')).json()).catch(() => null);
    check('whoami answers with the cookie', me && me.name, JSON.stringify(me));
    await step('the session list shows the running session', async () => {
        await page.waitForSelector(`tr[data-id="${SID}"]`, { timeout: 15000 });
        const state = await page.textContent(`tr[data-id="${SID}"] .state`);
        if (state !== 'running')
            throw new Error('state shown: ' + state);
    });
    await step('...with a live thumbnail', async () => {
        await page.waitForFunction((sid) => {
            const img = document.querySelector(`tr[data-id="${sid}"] img`);
            return img && img.complete && img.naturalWidth > 0;
        }, SID, { timeout: 15000 });
    });
    await shot(page, 'list');
    await step('open the session from the list', async () => {
        await page.click(`tr[data-id="${SID}"] td:nth-child(2) a`);
        await page.waitForURL(/session\.html\?id=/, { timeout: 10000 });
    });

    /* ---- the live desktop, view only ---- */
    let before = null;
    await step('the SPICE console connects view-only, with one ticket', async () => {
        await waitConsole(page, true);
        await sleep(500);
        if (pageTickets.length !== 1)
            throw new Error(pageTickets.length + ' tickets asked for');
        return /View only/.test(await page.textContent('#control-badge'));
    });
    await step('the SPICE canvas shows the guest desktop (non-blank pixels)', async () => {
        before = await waitFor(async () => {
            const s = await canvasStats(page);
            return s && s.colours >= 3 && s.lit > 1000 ? s : null;
        }, 20000);
        if (!before)
            throw new Error('canvas: ' + JSON.stringify(await canvasStats(page)));
        console.log('# canvas ' + before.width + 'x' + before.height + ', ' + before.colours + ' colours');
    });
    await shot(page, 'session-view-only');
    await step('view only: keys typed into the page do not reach the guest', async () => {
        await page.locator('#spice-screen canvas').focus();
        await typeKeys(page, 'touch /tmp/viewonly\n');
        await sleep(1500);
        const r = await guestExec(['test', '-e', '/tmp/viewonly']);
        return r.exit_code !== 0;
    });
    await step('the canvas changes when the agent types into the guest through the API', async () => {
        const base = await canvasStats(page);
        const r = await agent('POST', '/v1/sessions/' + SID + '/computer',
            { action: 'type', text: 'echo typed-by-the-api-' + Date.now() + '\n' });
        if (r.status !== 200)
            throw new Error('computer type: ' + r.status + ' ' + r.text);
        const after = await waitFor(async () => {
            const s = await canvasStats(page);
            return s && s.hash !== base.hash ? s : null;
        }, 15000);
        if (!after)
            throw new Error('canvas did not change');
    });
    await shot(page, 'session-after-api-typing');

    /* ---- take over ---- */
    await step('take over from the page: the lease is mine and the console reconnects with input', async () => {
        await page.click('#take-over');
        await page.waitForFunction(() => /You control/.test(document.getElementById('control-badge').textContent),
            null, { timeout: 15000 });
        holding = true;
        await waitConsole(page, false);
        const c = await agent('GET', '/v1/sessions/' + SID + '/control');
        if (!c.json || c.json.holder !== me.name)
            throw new Error('control: ' + c.text);
    });
    check('the .vv download link is shown while holding the lease', await page.isVisible('#download-vv'));
    await step('an agent action during the lease gets 409 "session under human control"', async () => {
        const r = await agent('POST', '/v1/sessions/' + SID + '/computer', { action: 'type', text: 'x' });
        if (r.status !== 409 || !/session under human control/.test(r.text))
            throw new Error(r.status + ' ' + r.text);
    });
    await step('the .vv file downloads while holding the lease', async () => {
        const r = await page.evaluate(async (sid) => {
            const resp = await fetch('/v1/sessions/' + sid + '/console.vv');
            return { status: resp.status, text: await resp.text() };
        }, SID);
        if (r.status !== 200 || !/\[virt-viewer\]/.test(r.text) || !/type=spice/.test(r.text))
            throw new Error(r.status + ' ' + r.text.slice(0, 200));
    });
    await step('type into the terminal through the page (checked with exec)', async () => {
        await guestExec(['rm', '-f', '/tmp/web-typed']);
        await page.locator('#spice-screen canvas').focus();
        await typeKeys(page, 'echo web-OK > /tmp/web-typed\n');
        const got = await waitFor(async () => {
            const r = await guestExec(['cat', '/tmp/web-typed']);
            return r.exit_code === 0 && r.stdout.trim() ? r.stdout.trim() : null;
        }, 15000, 500);
        if (got !== 'web-OK')
            throw new Error('/tmp/web-typed holds ' + JSON.stringify(got));
    });
    await shot(page, 'session-in-control');
    await step('Shift+Esc moves the focus out of the desktop', async () => {
        await page.keyboard.press('Shift+Escape');
        return page.evaluate(() => document.activeElement && document.activeElement.id === 'release');
    });
    await step('release from the page: view only again, agents may act', async () => {
        await page.click('#release');
        await page.waitForFunction(() => /^View only$/.test(document.getElementById('control-badge').textContent),
            null, { timeout: 15000 });
        holding = false;
        await waitConsole(page, true);
        const r = await agent('POST', '/v1/sessions/' + SID + '/computer', { action: 'mouse_move', x: 500, y: 300 });
        if (r.status !== 200)
            throw new Error('agent input after release: ' + r.status + ' ' + r.text);
        return page.isHidden('#download-vv');
    });

    /* ---- pause / resume ---- */
    await step('pause from the page: the API shows paused', async () => {
        await page.click('button[data-action=pause]');
        const s = await waitFor(async () => ((await sessionState()) === 'paused' ? 'paused' : null), 20000);
        if (s !== 'paused')
            throw new Error('state: ' + (await sessionState()));
        await page.waitForFunction(() => document.getElementById('session-state').textContent === 'paused', null,
            { timeout: 10000 });
        return page.isHidden('#action-error');
    });
    await shot(page, 'session-paused');
    await step('resume from the page: the API shows running', async () => {
        await page.click('button[data-action=resume]');
        const s = await waitFor(async () => ((await sessionState()) === 'running' ? 'running' : null), 30000);
        if (s !== 'running')
            throw new Error('state: ' + (await sessionState()));
    });

    /* ---- hibernate, snapshot, revert: the console follows ---- */
    await step('hibernate from the page: the API shows hibernated, the frame says so', async () => {
        await page.click('button[data-action=hibernate]');
        const s = await waitFor(async () => ((await sessionState()) === 'hibernated' ? 'hibernated' : null), 60000, 500);
        if (s !== 'hibernated')
            throw new Error('state: ' + (await sessionState()));
        await page.waitForSelector('#spice-screen .console-placeholder', { timeout: 10000 });
    });
    await shot(page, 'session-hibernated');
    await step('resume from the page: running again and the desktop reconnects by itself', async () => {
        await page.waitForFunction(() => !document.querySelector('button[data-action=resume]').disabled, null,
            { timeout: 10000 });
        await page.click('button[data-action=resume]');
        const s = await waitFor(async () => ((await sessionState()) === 'running' ? 'running' : null), 60000, 500);
        if (s !== 'running')
            throw new Error('state: ' + (await sessionState()));
        await waitConsole(page, true, 60000);
        const px = await waitFor(async () => {
            const x = await canvasStats(page);
            return x && x.colours >= 3 ? x : null;
        }, 20000);
        if (!px)
            throw new Error('no desktop after resume');
    });
    const snapName = 'web-' + Date.now();
    await step('snapshot from the page (asks a name)', async () => {
        await page.waitForFunction(() => !document.querySelector('button[data-action=snapshot]').disabled, null,
            { timeout: 10000 });
        await page.click('button[data-action=snapshot]');
        await page.waitForSelector('#dlg-snapshot[open]');
        await page.fill('#snapshot-name', snapName);
        await page.click('#dlg-snapshot button.primary');
        await page.waitForFunction((n) => document.getElementById('action-status').textContent.includes('Snapshot ' + n),
            snapName, { timeout: 60000 });
        const list = await agent('GET', '/v1/sessions/' + SID + '/snapshots');
        return (list.json.snapshots || []).some((x) => x.name === snapName) && page.isHidden('#action-error');
    });
    await step('revert from the page (picks the snapshot); the desktop comes back', async () => {
        await page.click('button[data-action=revert]');
        await page.waitForSelector('#dlg-revert[open]');
        await page.selectOption('#revert-name', snapName);
        await shot(page, 'dialog-revert');
        await page.click('#revert-ok');
        await page.waitForFunction(() => /Reverting to .*: done/.test(document.getElementById('action-status').textContent) ||
            !document.getElementById('action-error').hidden, null, { timeout: 90000 });
        if (!(await page.isHidden('#action-error')))
            throw new Error(await page.textContent('#action-error'));
        if ((await sessionState()) !== 'running')
            throw new Error('state: ' + (await sessionState()));
        await waitConsole(page, true, 60000);
    });

    /* ---- timeline ---- */
    await step('the timeline shows the reviewer\'s pause with their name', async () => {
        await page.locator('#timeline-section').scrollIntoViewIfNeeded();
        await page.waitForFunction((name) => [...document.querySelectorAll('#timeline li')]
            .some((li) => /\bpause\b/.test(li.innerText) && li.innerText.includes('by ' + name)), me.name, { timeout: 15000 });
    });
    await step('the timeline shows the agent\'s typing and exec with its exit code', async () => {
        const text = await page.innerText('#timeline');
        return /\btype\b/.test(text) && /exit code \d+/.test(text);
    });
    await shot(page, 'timeline');

    /* ---- artifacts ---- */
    await step('extract an artifact from the page and download it (same bytes as in the guest)', async () => {
        const path = '/home/user/web-artifact-' + Date.now() + '.txt';
        const made = await guestExec(['sh', '-c', `head -c 3000 /dev/urandom | base64 > ${path} && cat ${path}`]);
        await page.click('button[data-action=extract]');
        await page.fill('#extract-paths', path);
        await page.click('#dlg-extract button.primary');
        const link = page.locator(`#artifacts a[data-guest-path="${path}"]`).first();
        await link.waitFor({ timeout: 180000 });
        await shot(page, 'artifacts');
        const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), link.click()]);
        const bytes = await readFile(await dl.path(), 'utf8');
        if (bytes !== made.stdout)
            throw new Error(`downloaded ${bytes.length} bytes, guest file has ${made.stdout.length}`);
    });

    /* ---- diff ---- */
    await step('the diff against the template shows progress, then the new file as added', async () => {
        await guestExec(['sync']);
        await page.locator('#diff-section').scrollIntoViewIfNeeded();
        await page.fill('#diff-path', '/home/user');
        await page.click('#diff-run');
        await page.waitForSelector('#diff-progress:not([hidden]) progress', { timeout: 5000 });
        await shot(page, 'diff-progress');
        await page.waitForSelector('#diff-result h3, #diff-error:not([hidden])', { timeout: 180000 });
        const text = await page.innerText('#diff-section');
        if (!/Added \(\d+\)[\s\S]*web-artifact-/.test(text))
            throw new Error(text.slice(0, 400));
    });
    await shot(page, 'diff');

    /* ---- refusals ---- */
    await step('a ticket the page already used is refused once its connection is gone', async () => {
        const used = pageTickets[pageTickets.length - 1];
        if (!used)
            throw new Error('the page got no ticket');
        await page.click('#reconnect');
        await waitConsole(page, true);
        if (pageTickets[pageTickets.length - 1] === used)
            throw new Error('reconnecting did not take a new ticket');
        const r = await wsProbe(page, WS_BASE + used);
        if (!r.startsWith('refused'))
            throw new Error(r);
    });
    await step('a fresh ticket opens the console websocket (the probe works)', async () => {
        const t = await pageTicket(page);
        const r = await wsProbe(page, WS_BASE + t.body.url);
        if (r !== 'accepted')
            throw new Error(r);
    });
    await step('a ticket is good for one SPICE session: a second main channel with it is refused', async () => {
        const t = await pageTicket(page);
        const r = await page.evaluate(async (u) => {
            // A SPICE link message for the main channel: what a viewer sends first.
            function link() {
                const buf = new ArrayBuffer(16 + 18);
                const v = new DataView(buf);
                v.setUint32(0, 0x51444552, true); // "REDQ"
                v.setUint32(4, 2, true);
                v.setUint32(8, 2, true);
                v.setUint32(12, 18, true);
                v.setUint32(16, 0, true); // connection id
                v.setUint8(20, 1); // channel type: main
                v.setUint8(21, 0);
                v.setUint32(22, 0, true);
                v.setUint32(26, 0, true);
                v.setUint32(30, 18, true); // caps offset
                return buf;
            }
            function open() {
                return new Promise((resolve) => {
                    const ws = new WebSocket(u, ['binary']);
                    ws.binaryType = 'arraybuffer';
                    const timer = setTimeout(() => resolve({ ws, result: 'no answer' }), 5000);
                    ws.onopen = () => ws.send(link());
                    ws.onmessage = (e) => {
                        clearTimeout(timer);
                        const magic = new TextDecoder().decode(new Uint8Array(e.data, 0, 4));
                        resolve({ ws, result: magic === 'REDQ' ? 'spice' : 'data ' + magic });
                    };
                    ws.onclose = (e) => {
                        clearTimeout(timer);
                        resolve({ ws, result: 'closed ' + e.code });
                    };
                });
            }
            const first = await open();
            const second = await open();
            first.ws.close();
            second.ws.close();
            return first.result + ' / ' + second.result;
        }, WS_BASE + t.body.url);
        if (!/^spice \/ closed/.test(r))
            throw new Error('first / second: ' + r);
    });
    await step('an expired ticket is refused', async () => {
        const t = await pageTicket(page);
        const wait = Math.max(0, Date.parse(t.body.expires_at) - Date.now()) + 2000;
        console.log('# waiting ' + Math.round(wait / 1000) + ' s for the ticket to expire');
        await sleep(Math.min(wait, 120000));
        const r = await wsProbe(page, WS_BASE + t.body.url);
        if (!r.startsWith('refused'))
            throw new Error(r);
    });
    const other = await context.newPage();
    await other.goto(FOREIGN + '/');
    await step('a websocket from another origin (with the cookie, a valid ticket) is refused', async () => {
        const t = await pageTicket(page);
        const r = await wsProbe(other, WS_BASE + t.body.url);
        if (!r.startsWith('refused'))
            throw new Error(r);
    });
    await step('a POST from another origin with the cookie does not act (session stays running)', async () => {
        await other.evaluate(async (u) => {
            try {
                await fetch(u, { method: 'POST', credentials: 'include', mode: 'no-cors',
                    headers: { 'Content-Type': 'text/plain' }, body: '{}' });
            } catch {
                // refused or opaque: what matters is the session's state
            }
        }, BASE + '/v1/sessions/' + SID + '/pause');
        await sleep(1000);
        const s = await sessionState();
        if (s !== 'running')
            throw new Error('state after the foreign POST: ' + s);
    });
    await other.close();
    const bare = await browser.newContext();
    const anon = await bare.newPage();
    await anon.goto(BASE + '/login.html');
    await step('without the cookie the API answers 401', async () => {
        const status = await anon.evaluate(async () => (await fetch('/v1/sessions')).status);
        if (status !== 401)
            throw new Error('status ' + status);
    });
    await step('without the cookie the console websocket is refused (even with a valid ticket)', async () => {
        const t = await pageTicket(page);
        const r = await wsProbe(anon, WS_BASE + t.body.url);
        if (!r.startsWith('refused'))
            throw new Error(r);
    });
    await bare.close();

    /* ---- approvals (carreld --test-hooks) ---- */
    await step('a pending approval shows in the header count, live', async () => {
        const r = await agent('POST', '/v1/test/approvals',
            { session_id: SID, action: 'file_download', detail: { url: 'https://example.com/report.pdf' } });
        if (r.status !== 200 && r.status !== 201)
            throw new Error('test hook: ' + r.status + ' ' + r.text + ' (carreld needs --test-hooks)');
        await page.waitForFunction(() => Number(document.getElementById('approval-count').textContent) > 0, null,
            { timeout: 15000 });
    });
    await step('approve it with a reason on the approvals page', async () => {
        await page.click('#approvals-link');
        await page.waitForSelector('#pending article', { timeout: 10000 });
        await shot(page, 'approvals');
        const id = await page.getAttribute('#pending article', 'data-id');
        await page.fill('#reason-' + id, 'checked by the browser test');
        await page.click(`#pending article[data-id="${id}"] button.primary`);
        await page.waitForSelector(`#decided article[data-id="${id}"]`, { timeout: 10000 });
        const all = await agent('GET', '/v1/approvals?state=all');
        const a = (all.json.approvals || []).find((x) => x.id === id);
        if (!a || a.state !== 'approved' || a.reason !== 'checked by the browser test' || a.decided_by !== me.name)
            throw new Error(JSON.stringify(a));
        return page.isHidden('#approvals-error');
    });
    await shot(page, 'approvals-decided');

    await step('the page still shows the live desktop after all this', async () => {
        await page.goto(BASE + '/session.html?id=' + encodeURIComponent(SID));
        await waitConsole(page, true);
        const s = await waitFor(async () => {
            const x = await canvasStats(page);
            return x && x.colours >= 3 ? x : null;
        }, 20000);
        return !!s;
    });
    await shot(page, 'session-end');
    const real = realProblems(problems);
    check('no CSP violation and no script error in the pages', real.length === 0, real.join(' | '));
} catch (e) {
    fail('browser test stopped', e.stack);
} finally {
    if (holding)
        await agent('POST', '/v1/sessions/' + SID + '/control', { action: 'release' }).catch(() => {});
    if ((await sessionState().catch(() => null)) === 'paused')
        await agent('POST', '/v1/sessions/' + SID + '/resume', {}).catch(() => {});
    await browser.close();
    foreign.close();
}
process.exit(summary());
