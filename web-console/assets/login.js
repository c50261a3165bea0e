// Login: the token goes once in a POST body; the server answers with an HttpOnly cookie.
import { api, safeNext, showError } from './api.js';

const form = document.getElementById('login-form');
const token = document.getElementById('token');
const error = document.getElementById('login-error');
const submit = document.getElementById('login-submit');

form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(error, null);
    submit.disabled = true;
    try {
        await api('POST', '/v1/login', { token: token.value.trim() }, { noLoginRedirect: true });
        token.value = '';
        const next = new URLSearchParams(location.search).get('next');
        location.assign(safeNext(next));
    } catch (e) {
        showError(error, e, 'Login failed');
        token.select();
        token.focus();
    } finally {
        submit.disabled = false;
    }
});
token.focus();
