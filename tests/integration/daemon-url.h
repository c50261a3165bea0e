/*
 * The URL of a test's carreld. Each test starts its daemon with --listen 127.0.0.1:0, so the
 * kernel picks a free port (a port guessed from the pid can be taken on a busy machine), and
 * reads the one bound from STATE/web.url.
 */
#pragma once

#include <glib.h>

/* The daemon's http(s)://127.0.0.1:PORT once it listens, or NULL after timeout_s seconds; then
 * the daemon's log (log_path; NULL for none) is printed for the reader of the failure. */
char *test_daemon_url(const char *state_dir, guint timeout_s, const char *log_path);

/* The port of such a URL (0 when it has none). */
guint test_url_port(const char *url);
