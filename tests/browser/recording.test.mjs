// The session page plays a finished recording (issue 19), against a real carreld: the player
// shows a segment and it plays; a timeline event's Play button loads that event's segment and
// seeks to its offset (read from GET /v1/sessions/{id}/recording's `events`); the download link
// returns the listed WebM; no script error. Prints `ok - ...` / `not ok - ...`; exits 1 on any
// failure.
//
// Environment: CARREL_URL, CARREL_TOKEN_FILE, CARREL_SESSION (a session, running or stopped,
// with at least one finished segment and one indexed event), CARREL_TEST_OUT, CHROMIUM.
import { createHash } from 'node:crypto';
import { agentOf, env, login, realProblems } from './carrel.mjs';
import { check, fail, launch, shot, sleep, step, summary, watchProblems } from './lib.mjs';

const SEEK_TOLERANCE_S = 0.5;
const { base: BASE, sid: SID, token: TOKEN } = await env();
const { agent } = agentOf({ base: BASE, sid: SID, token: TOKEN });

// The player's state, read in the page.
function playerState(page) {
    return page.evaluate(() => {
        const v = document.getElementById('recording-video');
        return { segment: v.dataset.segment || '', src: v.getAttribute('src') || '', ready: v.readyState,
            duration: v.duration, time: v.currentTime, error: v.error ? v.error.code + ' ' + v.error.message : '',
            hidden: v.hidden };
    });
}

// The event to seek to: an indexed event in a finished segment, preferring one well inside it
// (a seek to 0 or to the end proves little), in another segment than the first when there is one.
function chooseEvent(rec) {
    const finished = new Map(rec.segments.filter((s) => !s.open).map((s) => [s.name, s]));
    const list = (rec.events || []).filter((e) => finished.has(e.segment) &&
        e.offset_ms <= finished.get(e.segment).duration_ms);
    const inside = (e) => e.offset_ms >= 1000 && e.offset_ms <= finished.get(e.segment).duration_ms - 1000;
    const first = rec.segments[0] && rec.segments[0].name;
    return list.find((e) => e.segment !== first && inside(e)) || list.find(inside) ||
        list[list.length - 1] || null;
}

const browser = await launch();
const problems = [];
try {
    const r = await agent('GET', '/v1/sessions/' + SID + '/recording');
    const rec = r.json || {};
    if (r.status !== 200 || !rec.enabled || !(rec.segments || []).some((s) => !s.open))
        throw new Error('session ' + SID + ' has no finished recording: ' + r.status + ' ' + r.text.slice(0, 300));
    const ev = chooseEvent(rec);
    check('the recording index has an event in a finished segment', ev, JSON.stringify(rec.events).slice(0, 300));
    const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, acceptDownloads: true });
    const page = await context.newPage();
    watchProblems(page, problems);
    await login(page, BASE, TOKEN);
    await page.goto(BASE + '/session.html?id=' + encodeURIComponent(SID));

    await step('the player shows the first segment and it plays', async () => {
        await page.waitForSelector('#recording-segments a[download]', { timeout: 20000 });
        // preload="metadata": the duration first, frames once it plays.
        await page.waitForFunction(() => {
            const v = document.getElementById('recording-video');
            return !v.hidden && v.readyState >= 1 && v.duration > 0;
        }, null, { timeout: 20000 });
        const before = await playerState(page);
        if (before.segment !== rec.segments[0].name)
            throw new Error('the player shows ' + before.segment + ', not ' + rec.segments[0].name);
        await page.evaluate(() => {
            const v = document.getElementById('recording-video');
            v.muted = true;
            return v.play();
        });
        await page.waitForFunction((t) => document.getElementById('recording-video').currentTime > t + 0.3,
            before.time, { timeout: 10000 });
        const after = await playerState(page);
        await page.evaluate(() => document.getElementById('recording-video').pause());
        if (after.error)
            throw new Error('media error ' + after.error);
        if (after.ready < 2 || !(after.duration > 0))
            throw new Error('readyState ' + after.ready + ', duration ' + after.duration);
        console.log('# played ' + after.segment + ' to ' + after.time.toFixed(2) + ' s of ' + after.duration);
    });
    await shot(page, 'recording-playing');

    if (ev) {
        const want = ev.offset_ms / 1000;
        await step(`event ${ev.seq}'s Play button loads ${ev.segment} and seeks to ${want.toFixed(2)} s`, async () => {
            const button = page.locator(`#timeline li[data-seq="${ev.seq}"] button.seek`);
            await button.waitFor({ timeout: 20000 });
            await button.click();
            await page.waitForFunction(({ name, t, tol }) => {
                const v = document.getElementById('recording-video');
                return v.dataset.segment === name && v.readyState >= 1 && Math.abs(v.currentTime - t) <= tol;
            }, { name: ev.segment, t: want, tol: SEEK_TOLERANCE_S }, { timeout: 15000 }).catch(() => {});
            const s = await playerState(page);
            if (s.segment !== ev.segment || !s.src.endsWith('/recording/' + ev.segment))
                throw new Error('the player shows ' + s.segment + ' (' + s.src + ')');
            if (s.error)
                throw new Error('media error ' + s.error);
            if (!(Math.abs(s.time - want) <= SEEK_TOLERANCE_S))
                throw new Error('at ' + s.time + ' s, not ' + want + ' s');
            const row = await page.getAttribute(`#timeline li[data-seq="${ev.seq}"]`, 'class');
            if (!/\bplaying\b/.test(row || ''))
                throw new Error('the event\'s row is not marked playing: ' + row);
        });
        await shot(page, 'recording-seeked');
    }

    const name = rec.segments.find((s) => !s.open).name;
    const listed = rec.segments.find((s) => s.name === name).sha256;
    await step(`the download link of ${name} returns the listed WebM`, async () => {
        const [download] = await Promise.all([
            page.waitForEvent('download', { timeout: 20000 }),
            page.click(`#recording-segments a[data-segment="${name}"]`),
        ]);
        const stream = await download.createReadStream();
        const parts = [];
        for await (const chunk of stream)
            parts.push(chunk);
        const body = Buffer.concat(parts);
        if (body.subarray(0, 4).toString('hex') !== '1a45dfa3')
            throw new Error('no EBML magic: ' + body.subarray(0, 4).toString('hex'));
        const sum = createHash('sha256').update(body).digest('hex');
        if (sum !== listed)
            throw new Error('sha256 ' + sum + ', listed ' + listed);
        if (download.suggestedFilename() !== name)
            throw new Error('saved as ' + download.suggestedFilename());
    });
    await sleep(500);
    const real = realProblems(problems);
    check('no script error in the page', real.length === 0, real.join(' | '));
    await context.close();
} catch (e) {
    fail('recording test stopped', e.stack);
} finally {
    await browser.close();
}
process.exit(summary());
