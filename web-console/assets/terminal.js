// Terminal panel: a shell in the guest over GET /v1/sessions/{id}/shell (a websocket), for the
// control lease's holder. Rendering is deliberately small: a <pre> that keeps printable text,
// carriage returns, backspaces and newlines, and drops other ANSI escape sequences (no cursor
// addressing: full-screen programs show poorly; use carrel shell or remote-viewer for those).

const ESC_SEQ = /\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78DEHMc])/g;
const MAX_CHARS = 200000;

const KEYS = {
    Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b',
    ArrowUp: '\x1b[A', ArrowDown: '\x1b[B', ArrowRight: '\x1b[C', ArrowLeft: '\x1b[D',
    Home: '\x1b[H', End: '\x1b[F', Delete: '\x1b[3~', PageUp: '\x1b[5~', PageDown: '\x1b[6~',
};

export class TerminalPanel {
    constructor(screen, status, path) {
        this.screen = screen;
        this.status = status;
        this.path = path;
        this.ws = null;
        this.lines = [''];
        this.decoder = new TextDecoder();
        this.encoder = new TextEncoder();
        screen.addEventListener('keydown', (e) => this.key(e));
        screen.addEventListener('paste', (e) => {
            e.preventDefault();
            this.send(e.clipboardData.getData('text'));
        });
    }

    open() {
        if (this.ws)
            return;
        const url = new URL(this.path + '?rows=24&cols=100', location.href);
        url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
        this.lines = [''];
        this.render();
        this.status.textContent = 'Connecting…';
        const ws = new WebSocket(url);
        ws.binaryType = 'arraybuffer';
        ws.onopen = () => {
            this.status.textContent = 'Connected: type into the terminal.';
            this.screen.focus();
        };
        ws.onmessage = (m) => (typeof m.data === 'string' ? this.control(m.data) : this.write(m.data));
        ws.onclose = (e) => {
            if (this.ws === ws)
                this.ws = null;
            if (!this.ended)
                this.status.textContent = 'Closed' + (e.reason ? ': ' + e.reason : '') + '.';
        };
        this.ended = false;
        this.ws = ws;
    }

    close() {
        if (this.ws)
            this.ws.close(1000);
        this.ws = null;
    }

    control(text) {
        let m;
        try {
            m = JSON.parse(text);
        } catch {
            return;
        }
        if (m.type === 'exit') {
            this.ended = true;
            this.status.textContent = 'The shell exited with ' + m.exit_code + '.';
        } else if (m.type === 'error' && m.error) {
            this.ended = true;
            this.status.textContent = 'Error: ' + m.error.message;
        }
    }

    write(buffer) {
        const text = this.decoder.decode(buffer, { stream: true }).replace(ESC_SEQ, '');
        let line = this.lines.pop();
        for (const c of text) {
            if (c === '\n') {
                this.lines.push(line);
                line = '';
            } else if (c === '\r') {
                line = '';
            } else if (c === '\b') {
                line = line.slice(0, -1);
            } else if (c >= ' ' || c === '\t') {
                line += c;
            }
        }
        this.lines.push(line);
        while (this.lines.length > 2000)
            this.lines.shift();
        this.render();
    }

    render() {
        let text = this.lines.join('\n');
        if (text.length > MAX_CHARS)
            text = text.slice(-MAX_CHARS);
        this.screen.textContent = text;
        this.screen.scrollTop = this.screen.scrollHeight;
    }

    send(text) {
        if (this.ws && this.ws.readyState === WebSocket.OPEN && text)
            this.ws.send(this.encoder.encode(text));
    }

    key(e) {
        if (!this.ws || e.metaKey)
            return;
        let out = KEYS[e.key];
        if (!out && e.ctrlKey && /^[a-z]$/i.test(e.key))
            out = String.fromCharCode(e.key.toUpperCase().charCodeAt(0) - 64);
        else if (!out && !e.ctrlKey && !e.altKey && e.key.length === 1)
            out = e.key;
        if (!out)
            return;
        e.preventDefault();
        this.send(out);
    }
}
