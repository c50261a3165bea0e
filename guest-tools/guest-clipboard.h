/* The clipboard's background server, started by "clipboard set". */
#pragma once

#include "guest.h"

G_BEGIN_DECLS

/* Takes CLIPBOARD and PRIMARY with text and serves them until another client takes CLIPBOARD
 * or CARREL_GUEST_CLIPBOARD_SERVE_SECONDS pass.  Reports "ok\n" or "error CODE MESSAGE\n" on
 * status_fd once ownership is confirmed or failed, then closes it.  Never returns. */
G_GNUC_NORETURN void carrel_guest_clipboard_serve(const CarrelGuestOptions *options,
                                                  const char *text, int status_fd);

G_END_DECLS
