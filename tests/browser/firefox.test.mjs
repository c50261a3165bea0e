// The web console in Debian's Firefox ESR (puppeteer-core over WebDriver BiDi): log in, the list
// shows the running session with its thumbnail, the session page paints the SPICE desktop, and
// the approvals page loads; no script errors. Chromium runs the full test (console.test.mjs).
// Environment: CARREL_URL, CARREL_TOKEN_FILE, CARREL_SESSION, CARREL_TEST_OUT, FIREFOX.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const BASE = (process.env.CARREL_URL || '').replace(/\/$/, '');
const SID = process.env.CARREL_SESSION;
const TOKEN = (await readFile(process.env.CARREL_TOKEN_FILE, 'utf8')).trim();
// CARREL_TEST_OUT, or a new folder of our own (mkdtemp: never a name someone made first).
const OUT = process.env.CARREL_TEST_OUT || mkdtempSync(join(tmpdir(), 'carrel-firefox-'));
let passed = 0;
let failed = 0;
mkdirSync(OUT, { recursive: true });

async function step(what, fn) {
    try {
        const r = await fn();
        if (r === false)
            throw new Error('condition false');
        passed++;
        console.log('ok - ' + what);
    } catch (e) {
        failed++;
        console.log('not ok - ' + what + ' (' + String(e && e.message ? e.message : e).split('\n')[0].slice(0, 300) + ')');
    }
}

async function waitFor(fn, timeoutMs) {
    const end = Date.now() + timeoutMs;
    for (;;) {
        const v = await fn();
        if (v)
            return v;
        if (Date.now() > end)
            throw new Error('timed out');
        await new Promise((r) => setTimeout(r, 250));
    }
}

const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr',
    headless: true,
    // The e2e tier's TLS check serves a self-signed certificate made for the run.
    acceptInsecureCerts: process.env.CARREL_ACCEPT_CERT === '1',
});
const problems = [];
try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1366, height: 768 });
    page.on('pageerror', (e) => problems.push(String(e && e.message ? e.message : e)));
    await step('firefox: ' + (await browser.version()) + ' shows the login page', async () => {
        await page.goto(BASE + '/');
        await waitFor(() => page.url().includes('/login.html'), 10000);
        await page.waitForSelector('#token', { timeout: 10000 });
    });
    await step('firefox: log in with the token', async () => {
        await page.type('#token', TOKEN);
        await page.click('#login-submit');
        await waitFor(() => page.url() === BASE + '/', 15000);
        return !page.url().includes(TOKEN);
    });
    await step('firefox: the session list shows the running session and its thumbnail', async () => {
        await page.waitForSelector(`tr[data-id="${SID}"]`, { timeout: 15000 });
        await waitFor(() => page.evaluate((sid) => {
            const img = document.querySelector(`tr[data-id="${sid}"] img`);
            return !!(img && img.complete && img.naturalWidth > 0);
        }, SID), 20000);
    });
    await page.screenshot({ path: join(OUT, 'firefox-list.png') });
    await step('firefox: the session page paints the guest desktop (non-blank canvas)', async () => {
        await page.goto(BASE + '/session.html?id=' + encodeURIComponent(SID));
        const stats = await waitFor(() => page.evaluate(() => {
            const c = document.querySelector('#spice-screen canvas');
            if (!c || !c.width || !c.height)
                return null;
            const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const colours = new Set();
            for (let i = 0; i < data.length && colours.size < 64; i += 4)
                colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
            return colours.size > 2 ? { w: c.width, h: c.height, colours: colours.size } : null;
        }), 30000);
        console.log('# firefox canvas ' + stats.w + 'x' + stats.h + ', ' + stats.colours + '+ colours');
    });
    await page.screenshot({ path: join(OUT, 'firefox-session.png') });
    await step('firefox: the approvals page loads', async () => {
        await page.goto(BASE + '/approvals.html');
        await page.waitForSelector('main', { timeout: 10000 });
    });
    await step('firefox: no script errors in the pages', async () => {
        if (problems.length)
            throw new Error(problems.join(' | '));
    });
} finally {
    await browser.close();
}
console.log(`firefox: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
