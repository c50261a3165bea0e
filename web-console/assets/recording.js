// The session's screen recording beside the timeline: a player of its WebM segments, a download
// link per segment, and seeking to a timeline event through the recording's index
// (GET /v1/sessions/{id}/recording -> {enabled, fps, segments, dropped, events: [{seq, segment,
// offset_ms}]}; GET .../recording/{name} -> video/webm).
import { api, el, fmtBytes, fmtDuration, seg } from './api.js';

export class RecordingPanel {
    constructor(base, { status, video, segments }) {
        this.base = base;
        this.status = status;
        this.video = video;
        this.segments = segments;
        this.enabled = false;
        this.index = new Map(); // event seq -> {segment, offset_ms}
        this.newest = 0; // the newest event seq the index had
        this.loading = null;
    }

    // Reads the recording's state and index again; never throws (the page goes on without it).
    load() {
        if (!this.loading) {
            this.loading = this.fetch().finally(() => {
                this.loading = null;
            });
        }
        return this.loading;
    }

    async fetch() {
        let r;
        try {
            r = await api('GET', this.base + '/recording');
        } catch (e) {
            this.off(e.status === 404 ? 'This session has no recording.' : 'Cannot load the recording: ' + e.message);
            return;
        }
        if (!r || !r.enabled) {
            this.off('Recording is off for this session (its policy\'s [recording] enabled).');
            return;
        }
        this.enabled = true;
        this.index = new Map((r.events || []).filter((e) => e && e.segment).map((e) => [e.seq, e]));
        this.newest = Math.max(0, ...this.index.keys());
        const list = r.segments || [];
        this.segments.replaceChildren(...list.map((s) => el('li', {},
            el('a', { href: this.url(s.name), download: s.name, 'data-segment': s.name }, s.name), ' ',
            el('span', { class: 'meta notice' }, '(' + [fmtDuration(s.duration_ms || 0), fmtBytes(s.bytes || 0),
                s.open ? 'recording now' : ''].filter(Boolean).join(', ') + ')'))));
        this.video.hidden = list.length === 0;
        this.status.textContent = list.length
            ? list.length + (list.length === 1 ? ' segment' : ' segments') + ' at ' + (r.fps || '?') + ' fps' +
                (r.dropped ? ' · ' + r.dropped + ' dropped' : '') + '. Choose an event to play from it.'
            : 'Recording is on; nothing recorded yet.';
        if (list.length && !this.video.getAttribute('src'))
            this.show(list[0].name);
    }

    off(text) {
        this.enabled = false;
        this.index = new Map();
        this.video.hidden = true;
        this.video.removeAttribute('src');
        this.segments.replaceChildren();
        this.status.textContent = text;
    }

    url(name) {
        return this.base + '/recording/' + seg(name);
    }

    show(name) {
        if (this.video.dataset.segment === name)
            return false;
        this.video.dataset.segment = name;
        this.video.src = this.url(name);
        return true;
    }

    // TRUE when the event may have a place in the recording: it had one when the index was read,
    // or it is newer than that (the index is read again when it is chosen).
    mayHave(seq) {
        return this.enabled && (this.index.has(seq) || seq > this.newest);
    }

    // Loads the event's segment and seeks to its offset; reads the index again for an event
    // newer than it. Returns whether it found the event.
    async seek(seq) {
        if (!this.index.has(seq))
            await this.load();
        const at = this.index.get(seq);
        if (!at) {
            this.status.textContent = 'Event ' + seq + ' is not in the recording.';
            return false;
        }
        const seconds = Math.max(0, (at.offset_ms || 0) / 1000);
        this.video.hidden = false;
        this.video.dataset.seekMs = String(at.offset_ms || 0);
        this.video.dataset.seq = String(seq);
        const changed = this.show(at.segment);
        const go = () => {
            this.video.currentTime = seconds;
        };
        // Before its metadata a new segment keeps the time as its start position; set it again
        // once the metadata is in.
        if (changed || this.video.readyState < 1)
            this.video.addEventListener('loadedmetadata', go, { once: true });
        go();
        this.status.textContent = 'Event ' + seq + ': ' + at.segment + ' at ' + fmtDuration(at.offset_ms || 0) + '.';
        return true;
    }
}
