// recording.test.mjs against mock-server.mjs (no VM): a 20 s seekable WebM made with GStreamer
// (gst-launch-1.0: videotestsrc ! vp8enc ! webmmux, as carreld's recorder writes them) served as
// both finished segments of the mock session, with their sha256 listed. Prints the test's
// ok / not ok lines; exits with its status.
//   node recording-mock.mjs      (CARREL_TEST_OUT: where screenshots go; GST_LAUNCH, CHROMIUM)
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMock, MOCK_TOKEN } from './mock-server.mjs';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'carrel-rec-mock-'));
let status = 1;
const { server, state } = createMock();
try {
    const webm = join(dir, 'seg.webm');
    execFileSync(process.env.GST_LAUNCH || 'gst-launch-1.0', ['-q', 'videotestsrc', 'num-buffers=80', 'pattern=ball',
        '!', 'video/x-raw,framerate=4/1,width=320,height=240', '!', 'vp8enc', 'deadline=1', '!', 'webmmux',
        '!', 'filesink', 'location=' + webm], { stdio: 'inherit' });
    state.webm = readFileSync(webm);
    const sha = createHash('sha256').update(state.webm).digest('hex');
    for (const s of state.recording.segments) {
        Object.assign(s, { sha256: sha, duration_ms: 20000, bytes: state.webm.length });
        delete s.open;
    }
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, MOCK_TOKEN + '\n', { mode: 0o600 });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    const child = spawn(process.execPath, [join(HERE, 'recording.test.mjs')], {
        stdio: 'inherit',
        env: { ...process.env, CARREL_URL: 'http://127.0.0.1:' + server.address().port, CARREL_TOKEN_FILE: tokenFile,
            CARREL_SESSION: state.sessions[0].id },
    });
    status = await new Promise((r) => child.on('exit', (code) => r(code ?? 1)));
} catch (e) {
    console.log('not ok - recording test against the mock server (' + String(e.message).split('\n')[0] + ')');
} finally {
    server.closeAllConnections?.();
    server.close();
    rmSync(dir, { recursive: true, force: true });
}
process.exit(status);
