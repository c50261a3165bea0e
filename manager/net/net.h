/* net: address rules (loopback-only listeners); isolated networks and egress proxy later. */
#pragma once

#include <gio/gio.h>

#include "util/util.h"

G_BEGIN_DECLS

/*
 * Parses "HOST:PORT" for a TCP listener and refuses anything but a loopback address
 * (127.0.0.0/8 or ::1), so the API is never exposed beyond the host by accident.
 */
GSocketAddress *carrel_net_parse_loopback_listen(const char *text, GError **error);

G_END_DECLS
