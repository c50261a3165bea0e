// The console's pages against mock-server.mjs (no VM, no SPICE): login, list, filters, session
// page controls, dialogs, timeline, artifacts download, diff progress, lease buttons, approvals,
// keyboard basics, CSP cleanliness, a 1366x768 screen. Prints ok / not ok lines; exit 1 on failure.
//   node pages.test.mjs          (CARREL_TEST_OUT: where screenshots go)
import { readFile } from 'node:fs/promises';
import { createMock, MOCK_TOKEN } from './mock-server.mjs';
import { check, fail, launch, outDir, shot, step, summary, waitFor, watchProblems } from './lib.mjs';

const { server, state, changed } = createMock();
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const BASE = 'http://127.0.0.1:' + server.address().port;
console.log('# mock carreld at ' + BASE + '; screenshots in ' + outDir());

const browser = await launch();
const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, acceptDownloads: true });
const page = await context.newPage();
const problems = watchProblems(page, []);

async function unlabelled() {
    return page.evaluate(() => [...document.querySelectorAll('input, select, textarea')]
        .filter((i) => i.type !== 'hidden' && !i.closest('dialog:not([open])') && i.labels.length === 0 &&
            !i.getAttribute('aria-label'))
        .map((i) => i.id || i.name || i.outerHTML.slice(0, 60)));
}

try {
    await step('without a cookie, / sends the browser to the login page with next=/', async () => {
        await page.goto(BASE + '/');
        await page.waitForURL(/\/login\.html\?next=%2F$/, { timeout: 5000 });
    });
    await step('a wrong token shows the API error in an alert', async () => {
        await page.fill('#token', 'wrong');
        await page.press('#token', 'Enter');
        await page.waitForSelector('#login-error:not([hidden])', { timeout: 5000 });
        const text = await page.textContent('[role=alert]');
        if (!/invalid token/.test(text))
            throw new Error('alert says: ' + text);
    });
    await shot(page, 'login-error');
    await step('logging in with the token lands on the session list', async () => {
        await page.fill('#token', MOCK_TOKEN);
        await page.click('#login-submit');
        await page.waitForURL(BASE + '/', { timeout: 5000 });
        await page.waitForSelector('#session-rows tr', { timeout: 5000 });
    });
    check('the token is in no URL and not in web storage',
        !state.log.some((l) => l.includes(MOCK_TOKEN)) &&
        await page.evaluate((t) => !JSON.stringify({ ...localStorage }).includes(t) &&
            !JSON.stringify({ ...sessionStorage }).includes(t) && !document.cookie.includes('carrel_session'), MOCK_TOKEN));
    await step('the list shows both sessions with state, template and version, age, labels', async () => {
        const rows = await page.$$eval('#session-rows tr', (trs) => trs.map((tr) => tr.innerText));
        if (rows.length !== 2)
            throw new Error(rows.length + ' rows');
        const run = rows.find((r) => r.includes('agent-run-1'));
        if (!run || !/running/.test(run) || !/tiny v1/.test(run) || !/task=invoice/.test(run) || !/1 h/.test(run))
            throw new Error(JSON.stringify(rows));
    });
    await step('a running session has a live thumbnail, a stopped one a placeholder', async () => {
        await page.waitForFunction(() => {
            const img = document.querySelector('tr[data-id="s-0a1b2c3d4e5f"] img');
            return img && img.complete && img.naturalWidth > 0;
        }, null, { timeout: 5000 });
        return page.isVisible('tr[data-id="s-111122223333"] .placeholder');
    });
    check('the list asks for thumbnails, which are neither kept nor timeline events',
        state.shotQueries.length > 0 && state.shotQueries.every((q) => new URLSearchParams(q).get('thumbnail') === '1'),
        JSON.stringify(state.shotQueries));
    await step('the pending approvals count links to the approvals page', async () => {
        await page.waitForFunction(() => document.getElementById('approval-count').textContent === '1', null, { timeout: 5000 });
        return (await page.getAttribute('#approvals-link', 'href')) === '/approvals.html';
    });
    await step('filters: state, template and text', async () => {
        await page.selectOption('#filter-state', 'running');
        let n = await page.$$eval('#session-rows tr', (t) => t.length);
        if (n !== 1)
            throw new Error('state filter: ' + n);
        await page.selectOption('#filter-state', '');
        await page.selectOption('#filter-template', 'desktop');
        n = await page.$$eval('#session-rows tr', (t) => t.length);
        if (n !== 1)
            throw new Error('template filter: ' + n);
        await page.selectOption('#filter-template', '');
        await page.fill('#filter-text', 'team=ops');
        n = await page.$$eval('#session-rows tr', (t) => t.length);
        await page.fill('#filter-text', '');
        return n === 1;
    });
    await step('the list updates live from the stream', async () => {
        state.sessions[1].state = 'running';
        changed();
        await page.waitForFunction(() => document.querySelector('tr[data-id="s-111122223333"] .state').textContent === 'running',
            null, { timeout: 5000 });
        state.sessions[1].state = 'stopped';
        changed();
    });
    await step('the skip link is the first thing Tab reaches', async () => {
        await page.reload();
        await page.waitForSelector('#session-rows tr');
        await page.keyboard.press('Tab');
        const skipped = await page.evaluate(() => document.activeElement.classList.contains('skip-link'));
        await page.keyboard.press('Enter');
        return skipped && page.evaluate(() => location.hash === '#main');
    });
    check('every form field of the list has a label', (await unlabelled()).length === 0, JSON.stringify(await unlabelled()));
    check('no horizontal scrolling at 1366x768 (list)',
        await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
    await shot(page, 'list');

    await step('a real WebM for the session page player: 3 s of a canvas recorded by Chromium (VP8)', async () => {
        const b64 = await page.evaluate(async () => {
            const canvas = document.createElement('canvas');
            canvas.width = 64;
            canvas.height = 48;
            const ctx = canvas.getContext('2d');
            const rec = new MediaRecorder(canvas.captureStream(10), { mimeType: 'video/webm;codecs=vp8' });
            const parts = [];
            rec.ondataavailable = (e) => parts.push(e.data);
            const done = new Promise((r) => { rec.onstop = r; });
            rec.start();
            const end = Date.now() + 3000;
            while (Date.now() < end) {
                ctx.fillStyle = 'hsl(' + (Date.now() % 360) + ',80%,50%)';
                ctx.fillRect(0, 0, 64, 48);
                await new Promise((r) => setTimeout(r, 50));
            }
            rec.stop();
            await done;
            const buf = new Uint8Array(await new Blob(parts, { type: 'video/webm' }).arrayBuffer());
            let s = '';
            for (const x of buf)
                s += String.fromCharCode(x);
            return btoa(s);
        });
        state.webm = Buffer.from(b64, 'base64');
        return state.webm.length > 100;
    });
    await step('a row opens the session page', async () => {
        await page.click('a[href="/session.html?id=s-0a1b2c3d4e5f"]');
        await page.waitForURL(/session\.html\?id=s-0a1b2c3d4e5f/);
        await page.waitForSelector('#timeline li', { timeout: 5000 });
    });
    await step('view only by default: the badge says so', async () => {
        return /View only/.test(await page.textContent('#control-badge')) && await page.isHidden('#download-vv');
    });
    await step('the timeline shows time, actor, kind, action, duration, exit code, errors, screenshots', async () => {
        const text = await page.innerText('#timeline');
        for (const want of ['by agent', 'command', 'exit code 3', 'error: permission denied', '5.20 s', 'lifecycle'])
            if (!text.includes(want))
                throw new Error('missing "' + want + '" in ' + text);
        return (await page.getAttribute('#timeline img', 'src')) === '/v1/sessions/s-0a1b2c3d4e5f/screenshots/shot-2.png';
    });
    await step('agents and people side by side, each named; typed text shown redacted', async () => {
        const person = await page.$$eval('#timeline li.person', (lis) => lis.map((li) => li.innerText));
        const agentBadge = await page.textContent('#timeline li[data-seq="3"] .who');
        if (person.length !== 3 || !person.every((t) => t.includes('person · alice')))
            throw new Error(JSON.stringify(person));
        if (agentBadge !== 'agent · agent')
            throw new Error('agent badge: ' + agentBadge);
        const text = person.join(' | ');
        for (const want of ['left click at 412, 300', 'ctrl+c', '5 characters typed (redacted by policy)'])
            if (!text.includes(want))
                throw new Error('missing "' + want + '" in ' + text);
    });
    const visibleSeqs = () => page.$$eval('#timeline li', (lis) => lis.filter((li) => li.offsetParent !== null)
        .map((li) => Number(li.dataset.seq)));
    await step('the filter shows people only, agents only, then everyone', async () => {
        await page.selectOption('#timeline-filter', 'person');
        const people = await visibleSeqs();
        await page.selectOption('#timeline-filter', 'agent');
        const agents = await visibleSeqs();
        await page.selectOption('#timeline-filter', 'all');
        const all = await visibleSeqs();
        if (JSON.stringify(people) !== '[5,6,7]' || agents.some((x) => x >= 5 && x <= 7) || agents.length < 4 ||
            all.length !== people.length + agents.length)
            throw new Error(JSON.stringify({ people, agents, all }));
        return /of/.test(await page.textContent('#timeline-status'));
    });
    await step('the recording lists its segments with download links', async () => {
        await page.waitForSelector('#recording-segments a[download]', { timeout: 5000 });
        const links = await page.$$eval('#recording-segments a[download]', (as) => as.map((a) => a.getAttribute('href')));
        // Events the index places have a Play button; older ones it does not place have none.
        const seekable = await page.$$eval('#timeline button.seek', (bs) => bs.map((b) => Number(b.dataset.seq)));
        if (JSON.stringify(seekable) !== '[2,5,6,7]')
            throw new Error('Play buttons on ' + JSON.stringify(seekable));
        return JSON.stringify(links) === JSON.stringify(['/v1/sessions/s-0a1b2c3d4e5f/recording/seg-000001.webm',
            '/v1/sessions/s-0a1b2c3d4e5f/recording/seg-000002.webm']) && await page.isVisible('#recording-video');
    });
    await step('clicking an event loads its segment and seeks to its offset', async () => {
        await page.click('#timeline li[data-seq="6"] button.seek');
        await page.waitForFunction(() => document.getElementById('recording-video').dataset.segment === 'seg-000002.webm',
            null, { timeout: 5000 });
        const v = await page.evaluate(() => {
            const video = document.getElementById('recording-video');
            return { src: video.getAttribute('src'), seekMs: video.dataset.seekMs, time: video.currentTime };
        });
        if (v.src !== '/v1/sessions/s-0a1b2c3d4e5f/recording/seg-000002.webm' || v.seekMs !== '12345')
            throw new Error(JSON.stringify(v));
        await waitFor(() => state.log.includes('GET /v1/sessions/s-0a1b2c3d4e5f/recording/seg-000002.webm'), 5000);
        if (!state.log.includes('GET /v1/sessions/s-0a1b2c3d4e5f/recording/seg-000002.webm'))
            throw new Error('the player never asked for the segment');
        // Back to the first segment, for an agent's event.
        await page.click('#timeline li[data-seq="2"] button.seek');
        await page.waitForFunction(() => document.getElementById('recording-video').dataset.segment === 'seg-000001.webm',
            null, { timeout: 5000 });
        // With a real video the player is at the event's offset once the segment loaded.
        const at = state.webm ? await page.waitForFunction(() => {
            const v = document.getElementById('recording-video');
            return v.readyState >= 1 && Math.abs(v.currentTime - 1.5) < 0.05 ? v.currentTime : null;
        }, null, { timeout: 10000 }).then((h) => h.jsonValue()).catch(() => null) : 1.5;
        if (at === null)
            throw new Error('the player is not at 1.5 s: ' + JSON.stringify(await page.evaluate(() => {
                const v = document.getElementById('recording-video');
                return { readyState: v.readyState, time: v.currentTime, duration: v.duration, error: v.error && v.error.code };
            })));
        return (await page.getAttribute('#recording-video', 'data-seek-ms')) === '1500' &&
            await page.isVisible('#timeline li[data-seq="2"].playing');
    });
    await shot(page, 'session-recording');
    await step('no recording (404) or recording off: the player says so, the timeline still works', async () => {
        state.recordingMode = 'absent';
        await page.reload();
        await page.waitForSelector('#timeline li', { timeout: 5000 });
        await page.waitForFunction(() => /no recording/.test(document.getElementById('recording-status').textContent),
            null, { timeout: 5000 });
        const absent = await page.isHidden('#recording-video') && (await page.$$('#timeline button.seek')).length === 0;
        state.recordingMode = 'off';
        await page.reload();
        await page.waitForFunction(() => /Recording is off/.test(document.getElementById('recording-status').textContent),
            null, { timeout: 5000 });
        const off = await page.isHidden('#recording-video') && (await page.$$('#timeline li')).length >= 7;
        state.recordingMode = 'on';
        await page.reload();
        await page.waitForSelector('#timeline button.seek', { timeout: 5000 });
        return absent && off;
    });
    await step('pause from the page: state and timeline follow (with the reviewer)', async () => {
        await page.click('button[data-action=pause]');
        await page.waitForFunction(() => document.getElementById('session-state').textContent === 'paused', null, { timeout: 5000 });
        await page.waitForFunction(() => /lifecycle pause[\s\S]*by admin/.test(document.getElementById('timeline').innerText),
            null, { timeout: 5000 });
        return (await page.isDisabled('button[data-action=pause]')) && !(await page.isDisabled('button[data-action=resume]'));
    });
    await shot(page, 'session-paused');
    await step('resume', async () => {
        await page.click('button[data-action=resume]');
        await page.waitForFunction(() => document.getElementById('session-state').textContent === 'running', null, { timeout: 5000 });
    });
    await step('take over: the badge and the .vv link follow; release hands back', async () => {
        await page.click('#take-over');
        await page.waitForFunction(() => /You control/.test(document.getElementById('control-badge').textContent), null, { timeout: 5000 });
        if (await page.isHidden('#download-vv'))
            throw new Error('.vv link hidden while holding the lease');
        await shot(page, 'session-in-control');
        await page.click('#release');
        await page.waitForFunction(() => /^View only$/.test(document.getElementById('control-badge').textContent), null, { timeout: 5000 });
        return page.isHidden('#download-vv');
    });
    await step('snapshot asks a name in a dialog and takes it', async () => {
        await page.click('button[data-action=snapshot]');
        await page.waitForSelector('#dlg-snapshot[open]');
        await shot(page, 'dialog-snapshot');
        await page.fill('#snapshot-name', 'from-test');
        await page.click('#dlg-snapshot button.primary');
        await page.waitForFunction(() => /Snapshot from-test taken/.test(document.getElementById('action-status').textContent), null, { timeout: 5000 });
        return state.snapshots.some((s) => s.name === 'from-test');
    });
    await step('revert offers the session\'s snapshots', async () => {
        await page.click('button[data-action=revert]');
        await page.waitForSelector('#dlg-revert[open]');
        const opts = await page.$$eval('#revert-name option', (o) => o.map((x) => x.value));
        await page.selectOption('#revert-name', 'before-login');
        await page.click('#revert-ok');
        await page.waitForFunction(() => /lifecycle revert/.test(document.getElementById('timeline').innerText), null, { timeout: 5000 });
        return opts.includes('before-login') && opts.includes('from-test');
    });
    await step('extract asks paths, then the artifact downloads from the list', async () => {
        await page.click('button[data-action=extract]');
        await page.fill('#extract-paths', '/home/user/out');
        await page.click('#dlg-extract button.primary');
        await page.waitForSelector('#artifacts a[download]', { timeout: 5000 });
        const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#artifacts a[download]')]);
        const bytes = await readFile(await dl.path(), 'utf8');
        const missingShown = /\/nope: no such file/.test(await page.innerText('#artifacts'));
        return bytes === 'artifact f-1\n' && missingShown;
    });
    await step('the diff shows a progress indicator, then added/changed/removed', async () => {
        await page.click('#diff-run');
        await page.waitForSelector('#diff-progress:not([hidden]) progress', { timeout: 2000 });
        await shot(page, 'diff-progress');
        await page.waitForSelector('#diff-result h3', { timeout: 10000 });
        const text = await page.innerText('#diff-result');
        return /Added \(1\)/.test(text) && /\+ \/home\/user\/new.txt/.test(text) && /Removed \(0\)/.test(text);
    });
    await step('an API error is shown in an alert (resume while running)', async () => {
        await page.evaluate(() => { document.querySelector('button[data-action=resume]').disabled = false; });
        await page.click('button[data-action=resume]');
        await page.waitForSelector('#action-error:not([hidden])', { timeout: 5000 });
        return /wrong_state/.test(await page.textContent('#action-error'));
    });
    check('no horizontal scrolling at 1366x768 (session, view only)',
        await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
    check('every form field of the session page has a label', (await unlabelled()).length === 0, JSON.stringify(await unlabelled()));
    await shot(page, 'session');
    await step('destroy asks for confirmation; cancel keeps the session', async () => {
        await page.click('button[data-action=destroy]');
        await page.waitForSelector('#dlg-destroy[open]');
        await shot(page, 'dialog-destroy');
        await page.keyboard.press('Escape');
        await page.waitForSelector('#dlg-destroy:not([open])', { state: 'attached' });
        return state.sessions[0].state !== 'destroyed';
    });
    await step('destroy confirmed', async () => {
        await page.click('button[data-action=destroy]');
        await page.click('#dlg-destroy-ok');
        await page.waitForFunction(() => document.getElementById('session-state').textContent === 'destroyed', null, { timeout: 5000 });
    });

    await step('approvals: approve with a reason moves it to the decided list', async () => {
        await page.goto(BASE + '/approvals.html');
        await page.waitForSelector('#pending article', { timeout: 5000 });
        await shot(page, 'approvals');
        await page.fill('#reason-a-1', 'looks fine');
        await page.click('#pending article button.primary');
        await page.waitForFunction(() => /approved/.test(document.getElementById('decided').innerText) &&
            /Nothing is waiting/.test(document.getElementById('pending').innerText), null, { timeout: 5000 });
        return state.approvals[0].reason === 'looks fine';
    });
    await shot(page, 'approvals-decided');
    check('every form field of the approvals page has a label', (await unlabelled()).length === 0);
    check('no horizontal scrolling at 1366x768 (approvals)',
        await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
    await step('log out clears the cookie and goes to the login page', async () => {
        await page.click('#logout');
        await page.waitForURL(/login\.html/);
    });

    // The mock refuses the console's websocket and answers 401 before login: those are expected.
    const real = problems.filter((p) => !/Failed to load resource|WebSocket connection to|Connection refused|Can't connect to websocket/.test(p));
    check('no CSP violation and no script error on any page', real.length === 0, real.join(' | '));
} catch (e) {
    fail('browser test crashed', e.stack);
} finally {
    await browser.close();
    server.close();
    for (const s of state.streams)
        s.res.destroy();
}
process.exit(summary());
