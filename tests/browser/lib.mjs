// Shared by the browser tests: TAP-like output, Debian's Chromium through playwright-core,
// page problem collection (console errors, CSP violations), screenshots for review.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

let passed = 0;
let failed = 0;
let current = 'setup'; // the step running, to say where a page problem happened

export function pass(what) {
    passed++;
    console.log('ok - ' + what);
}

export function fail(what, detail) {
    failed++;
    console.log('not ok - ' + what + (detail ? ' (' + String(detail).split('\n')[0].slice(0, 300) + ')' : ''));
}

export function check(what, cond, detail) {
    if (cond)
        pass(what);
    else
        fail(what, detail);
    return !!cond;
}

// step(what, fn): runs fn; passes when it resolves truthy (or undefined), fails on false or a throw.
export async function step(what, fn) {
    current = what;
    try {
        const r = await fn();
        if (r === false)
            fail(what);
        else
            pass(what);
        return true;
    } catch (e) {
        fail(what, e && e.message ? e.message : e);
        return false;
    }
}

export function summary() {
    console.log(`browser: ${passed} passed, ${failed} failed`);
    return failed === 0 && passed > 0 ? 0 : 1;
}

// CARREL_TEST_OUT, or a new folder of our own (mkdtemp: never a name someone made first).
let outDirPath = null;
export function outDir() {
    if (!outDirPath) {
        outDirPath = process.env.CARREL_TEST_OUT;
        if (outDirPath)
            mkdirSync(outDirPath, { recursive: true });
        else
            outDirPath = mkdtempSync(join(tmpdir(), 'carrel-browser-'));
    }
    return outDirPath;
}

let shotIndex = 0;
export async function shot(page, name) {
    const file = join(outDir(), String(++shotIndex).padStart(2, '0') + '-' + name + '.png');
    try {
        await page.screenshot({ path: file, fullPage: true });
    } catch (e) {
        console.log('# screenshot ' + name + ' failed: ' + e.message);
    }
    return file;
}

export async function launch() {
    return chromium.launch({
        executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
        // root in CI containers: Chromium's sandbox needs user namespaces it may not get.
        args: ['--no-sandbox', '--disable-dev-shm-usage'],
    });
}

// Collects what a page complains about: console errors, uncaught errors, CSP violations.
export function watchProblems(page, problems) {
    page.on('console', (msg) => {
        if (msg.type() === 'error')
            problems.push('console: ' + msg.text() + ' [during: ' + current + ']');
    });
    page.on('pageerror', (e) => problems.push('pageerror: ' + e.message + ' [during: ' + current + ']'));
    page.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (e) => {
            console.error('CSP violation: ' + e.violatedDirective + ' ' + (e.blockedURI || 'inline') +
                ' at ' + e.sourceFile + ':' + e.lineNumber);
        });
    });
    return problems;
}

export function sleep(ms) {
    return new Promise((r) => setTimeout(r, ms));
}

export async function waitFor(fn, timeoutMs, intervalMs = 250) {
    const end = Date.now() + timeoutMs;
    let last;
    while (Date.now() < end) {
        last = await fn();
        if (last)
            return last;
        await sleep(intervalMs);
    }
    return last;
}
