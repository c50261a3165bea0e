/*
 * hypervisor: a minimal RFB (VNC, RFC 6143) client used only as a change signal. QEMU's VNC
 * server answers an incremental FramebufferUpdateRequest only once part of the screen changed,
 * so the recorder takes a screendump after a change instead of on every tick. Pixels are never
 * kept: raw rectangles (8 bits per pixel) are counted and discarded. Private to the hypervisor
 * module and its unit test.
 */
#pragma once

#ifndef CARREL_HYPERVISOR_RFB_H_ALLOW
#error "hypervisor-rfb.h is private to the hypervisor module"
#endif

/* The watch type, poll, request and free are public (hypervisor.h): the recorder uses them. */
#include "hypervisor/hypervisor.h"

G_BEGIN_DECLS

/* Longest desktop name accepted in ServerInit (QEMU sends the domain's name). */
#define CARREL_RFB_MAX_NAME 4096
/* Most bytes a watch keeps between polls: the fixed part of one server message (a rectangle
 * header); payloads (pixels, colour maps, cut text) are skipped by count, never buffered. */
#define CARREL_RFB_HEAD_MAX 12

/*
 * Connects to the VNC server listening on the unix socket socket_path and does the handshake
 * (RFB 3.7 or 3.8, security type None, shared session) within timeout_ms. On return the pixel
 * format (8 bpp true colour), the encodings (Raw, DesktopSize) and the first incremental update
 * request are sent. NOT_FOUND when nothing is at socket_path, TIMEOUT when the server is too
 * slow, UNSUPPORTED for a protocol version or authentication carrel does not do, HYPERVISOR for
 * anything else; the message names the path.
 */
CarrelRfbWatch *carrel_rfb_watch_connect(const char *socket_path, guint timeout_ms, GError **error);

/* The same over an already connected stream socket fd, which the watch owns from now on (it is
 * closed on failure too). */
CarrelRfbWatch *carrel_rfb_watch_new_fd(int fd, guint timeout_ms, GError **error);

/* The socket, for poll() or a GSource (POLLIN); it stays owned by the watch. */
int carrel_rfb_watch_fd(CarrelRfbWatch *w);

/* The screen's current size (ServerInit's, then the last DesktopSize). */
guint carrel_rfb_watch_width(CarrelRfbWatch *w);
guint carrel_rfb_watch_height(CarrelRfbWatch *w);

/* Bytes of an incomplete message header kept between polls: at most CARREL_RFB_HEAD_MAX
 * whatever the server sends (its unit test checks that). */
gsize carrel_rfb_watch_held_bytes(CarrelRfbWatch *w);

G_END_DECLS
