// The live desktop: spice-html5 over carreld's websocket proxy, one fresh ticket per connection.
// View-only is enforced by the proxy; this page also keeps every input event away from
// spice-html5 while view-only (capturing listeners on the frame stop them before the canvas).
import { SpiceMainConn } from '/spice-html5/main.js';
import { api, seg } from './api.js';

const INPUT_EVENTS = ['keydown', 'keyup', 'keypress', 'mousedown', 'mouseup', 'mousemove', 'click',
    'dblclick', 'contextmenu', 'wheel'];

export class ConsoleView {
    // elements: {frame, screen, status, hint}; onState(state) is told 'connecting' | 'connected' |
    // 'disconnected' | 'error' with the view_only flag of the current ticket.
    constructor(sessionId, elements, onState) {
        this.id = sessionId;
        this.el = elements;
        this.onState = onState || (() => {});
        this.sc = null;
        this.viewOnly = true;
        this.generation = 0;
        this.connected = false;
        for (const type of INPUT_EVENTS)
            this.el.frame.addEventListener(type, (e) => this.filterInput(e), true);
        // spice-html5 focuses each canvas it makes: view only, that would only steal the page's
        // keyboard focus, so the canvas leaves the tab order and gives the focus back.
        new MutationObserver(() => this.tameCanvas()).observe(this.el.screen, { childList: true });
    }

    tameCanvas() {
        if (!this.viewOnly)
            return;
        for (const c of this.el.screen.querySelectorAll('canvas')) {
            c.tabIndex = -1;
            if (document.activeElement === c)
                c.blur();
        }
    }

    filterInput(e) {
        if (this.viewOnly) {
            // Not for the guest; Tab and scrolling keep working for the page.
            e.stopPropagation();
            return;
        }
        // In control: spice-html5 swallows every key (Tab too). Shift+Escape leaves the desktop.
        if (e.type === 'keydown' && e.key === 'Escape' && e.shiftKey) {
            e.stopPropagation();
            e.preventDefault();
            this.el.escapeTo?.focus();
        }
    }

    setStatus(text) {
        this.el.status.textContent = text;
    }

    stop() {
        this.generation++;
        if (this.sc) {
            try {
                this.sc.stop();
            } catch {
                // already closed
            }
            this.sc = null;
        }
        this.connected = false;
        this.el.screen.replaceChildren();
        this.el.screen.style.removeProperty('height');
    }

    // Asks carreld for a one-time ticket and connects with it.
    async connect() {
        this.stop();
        const gen = this.generation;
        this.setStatus('Connecting…');
        this.onState('connecting', this.viewOnly);
        let t;
        try {
            t = await api('POST', '/v1/sessions/' + seg(this.id) + '/console', {});
        } catch (e) {
            if (gen !== this.generation)
                return;
            this.setStatus('No console: ' + e.message);
            this.onState('error', this.viewOnly, e);
            return;
        }
        if (gen !== this.generation)
            return;
        this.viewOnly = t.view_only !== false;
        this.el.frame.classList.toggle('fit', this.viewOnly);
        this.el.frame.classList.toggle('in-control', !this.viewOnly);
        const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
        const uri = scheme + location.host + t.url;
        try {
            this.sc = new SpiceMainConn({
                uri,
                password: '', // carreld's proxy authenticates: the page holds no password
                screen_id: this.el.screen.id,
                onsuccess: () => {
                    if (gen !== this.generation)
                        return;
                    this.connected = true;
                    this.setStatus(this.viewOnly ? 'Connected (view only).' : 'Connected: you control the desktop.');
                    this.onState('connected', this.viewOnly);
                },
                onerror: (e) => {
                    if (gen !== this.generation)
                        return;
                    this.connected = false;
                    this.setStatus('Disconnected: ' + (e && e.message ? e.message : 'connection closed'));
                    this.onState('disconnected', this.viewOnly, e);
                },
            });
        } catch (e) {
            this.setStatus('Cannot connect: ' + e.message);
            this.onState('error', this.viewOnly, e);
        }
    }

    // The canvas spice-html5 draws the primary surface on (null before the first paint).
    canvas() {
        return this.el.screen.querySelector('canvas');
    }
}
