// Approvals: the pending queue with approve/deny and a reason; recently decided ones below.
import {
    api, el, fmtAge, fmtDateTime, initHeader, isLeaving, openStream, sessionUrl, seg, setApprovalCount,
    showError,
} from './api.js';

const $ = (x) => document.getElementById(x);
const error = $('approvals-error');
const status = $('approvals-status');
const RECENT = 20;
let all = new Map(); // id -> approval
const drafts = new Map(); // id -> reason typed so far (kept across redraws)

function detailText(d) {
    if (d === undefined || d === null)
        return '';
    return typeof d === 'string' ? d : JSON.stringify(d, null, 2);
}

async function decide(a, verb, reason) {
    showError(error, null);
    status.textContent = (verb === 'approve' ? 'Approving ' : 'Denying ') + a.id + '…';
    try {
        const r = await api('POST', '/v1/approvals/' + seg(a.id) + '/' + verb, { reason });
        drafts.delete(a.id);
        all.set(a.id, r && r.id ? r : { ...a, state: verb === 'approve' ? 'approved' : 'denied', reason });
        status.textContent = a.id + (verb === 'approve' ? ' approved.' : ' denied.');
        render();
    } catch (e) {
        status.textContent = '';
        showError(error, e, 'Cannot ' + verb + ' ' + a.id);
    }
}

function pendingItem(a) {
    const rid = 'reason-' + a.id;
    const reason = el('input', { id: rid, type: 'text', autocomplete: 'off', maxlength: 500 });
    reason.value = drafts.get(a.id) || '';
    reason.addEventListener('input', () => drafts.set(a.id, reason.value));
    const form = el('form', { 'aria-label': 'Decide on ' + a.action },
        el('div', { class: 'field' }, el('label', { for: rid }, 'Reason (optional)'), reason),
        el('button', { type: 'submit', class: 'primary', value: 'approve' }, 'Approve'),
        el('button', { type: 'submit', class: 'danger', value: 'deny' }, 'Deny'));
    form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const verb = ev.submitter && ev.submitter.value === 'deny' ? 'deny' : 'approve';
        decide(a, verb, reason.value.trim());
    });
    return el('article', { class: 'approval', 'data-id': a.id, 'aria-labelledby': 'h-' + a.id },
        el('h3', { id: 'h-' + a.id }, a.action || 'action', ' in ',
            el('a', { href: sessionUrl(a.session_id) }, a.session_id)),
        el('p', { class: 'notice' }, 'requested ', fmtDateTime(a.requested_at), ' (', fmtAge(a.requested_at), ' ago)',
            a.requested_by ? ' by ' + a.requested_by : ''),
        detailText(a.detail) ? el('pre', {}, detailText(a.detail)) : '',
        form);
}

function decidedItem(a) {
    return el('article', { class: 'approval', 'data-id': a.id },
        el('h3', {}, el('span', { class: 'decided-' + a.state }, a.state), ' · ', a.action || 'action', ' in ',
            el('a', { href: sessionUrl(a.session_id) }, a.session_id)),
        el('p', { class: 'notice' }, 'by ', a.decided_by || '?', ' at ', fmtDateTime(a.decided_at),
            a.reason ? ' · reason: ' + a.reason : ''));
}

function render() {
    const list = [...all.values()];
    const pending = list.filter((a) => (a.state || 'pending') === 'pending')
        .sort((a, b) => String(a.requested_at).localeCompare(String(b.requested_at)));
    const decided = list.filter((a) => a.state && a.state !== 'pending')
        .sort((a, b) => String(b.decided_at).localeCompare(String(a.decided_at))).slice(0, RECENT);
    // Keep the focus where it was when the list is drawn again (a reviewer may be typing).
    const active = document.activeElement && document.activeElement.id;
    $('pending').replaceChildren(...(pending.length ? pending.map(pendingItem)
        : [el('p', { class: 'notice' }, 'Nothing is waiting.')]));
    $('decided').replaceChildren(...(decided.length ? decided.map(decidedItem)
        : [el('p', { class: 'notice' }, 'No decision yet.')]));
    if (active && $(active))
        $(active).focus();
    setApprovalCount(pending.length);
}

async function loadAll() {
    try {
        const r = await api('GET', '/v1/approvals?state=all');
        all = new Map((r.approvals || []).map((a) => [a.id, a]));
        render();
        showError(error, null);
    } catch (e) {
        showError(error, e, 'Cannot list approvals');
    }
}

async function main() {
    await initHeader();
    if (isLeaving())
        return;
    await loadAll();
    openStream('', {
        approvals: (d) => {
            // The stream sends the pending ones: any that left the list was decided elsewhere.
            const pendingNow = new Set((d.approvals || []).map((a) => a.id));
            let gone = false;
            for (const a of all.values())
                if ((a.state || 'pending') === 'pending' && !pendingNow.has(a.id))
                    gone = true;
            for (const a of d.approvals || [])
                all.set(a.id, a);
            if (gone)
                loadAll();
            else
                render();
        },
    }, $('stream-status'));
}

main();
