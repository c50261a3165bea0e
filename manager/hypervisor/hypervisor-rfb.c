/*
 * A minimal RFB client (RFC 6143) that tells when a VNC display changed. Everything the server
 * sends comes from QEMU drawing what the guest shows, so every field is hostile: sizes and
 * counts are checked before use, payloads are skipped by count and never allocated, and the
 * only bytes kept between polls are the fixed part of one message (CARREL_RFB_HEAD_MAX).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_RFB_H_ALLOW
#include "hypervisor/hypervisor-rfb.h"

/* Longest failure reason read and shown (the rest is left unread: the connection ends). */
#define RFB_REASON_MAX 256
/* Bytes one poll reads at most: a flooding server cannot hold the caller's thread forever. */
#define RFB_POLL_MAX_BYTES (4 * 1024 * 1024)
/* How long a client message after the handshake may wait for room in the socket. */
#define RFB_WRITE_WAIT_MS 1000

#define RFB_SECURITY_NONE 1
/* Server-to-client message types. */
#define RFB_MSG_UPDATE 0
#define RFB_MSG_COLOURS 1
#define RFB_MSG_BELL 2
#define RFB_MSG_CUT_TEXT 3
#define RFB_ENCODING_RAW 0
#define RFB_ENCODING_DESKTOP_SIZE (-223)

/* What the next bytes of the stream are: the type byte, or the fixed part after it. */
typedef enum {
    RFB_READ_TYPE,    /* u8 message type */
    RFB_READ_UPDATE,  /* FramebufferUpdate: pad, u16 rectangles */
    RFB_READ_RECT,    /* u16 x, y, w, h, s32 encoding */
    RFB_READ_COLOURS, /* SetColourMapEntries: pad, u16 first, u16 count */
    RFB_READ_CUT,     /* ServerCutText: 3 pad, u32 length */
    RFB_READ_LAST
} RfbRead;

static const gsize head_sizes[RFB_READ_LAST] = {1, 3, 12, 5, 7};

struct _CarrelRfbWatch {
    int fd;
    guint width;
    guint height;
    gboolean outstanding; /* an update request is sent and its update has not come */
    gboolean changed;     /* an update with a rectangle completed since the last poll */
    gboolean failed;      /* the stream is out of step or closed: every later call fails */
    RfbRead state;
    guint8 head[CARREL_RFB_HEAD_MAX];
    gsize head_len;          /* bytes of the current fixed part read so far */
    guint64 skip;            /* payload bytes still to discard */
    gboolean skip_ends_rect; /* the payload being skipped is a rectangle's pixels */
    guint rects_left;        /* rectangles of the current update not yet complete */
};

static guint
be16(const guint8 *p)
{
    return ((guint)p[0] << 8) | p[1];
}

static guint32
be32(const guint8 *p)
{
    return ((guint32)p[0] << 24) | ((guint32)p[1] << 16) | ((guint32)p[2] << 8) | p[3];
}

static void
put16(guint8 *p, guint value)
{
    p[0] = (guint8)(value >> 8);
    p[1] = (guint8)value;
}

/* Guest-influenced text for an error message: printable ASCII only, the rest as '?'. */
static char *
printable(const guint8 *data, gsize len)
{
    GString *text = g_string_sized_new(len + 1);

    for (gsize i = 0; i < len; i++)
        g_string_append_c(text, data[i] >= 0x20 && data[i] < 0x7f ? (char)data[i] : '?');
    return g_string_free(text, FALSE);
}

/* Waits until fd is ready for events, or fails with TIMEOUT at deadline (monotonic µs). */
static gboolean
wait_fd(int fd, short events, gint64 deadline, GError **error)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = events};
        gint64 left_us = deadline - g_get_monotonic_time();
        int ready;

        if (left_us <= 0) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                        "the VNC server did not answer in time");
            return FALSE;
        }
        ready = poll(&pfd, 1, (int)MIN((left_us + 999) / 1000, G_MAXINT));
        if (ready < 0 && errno != EINTR) {
            int saved = errno;
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                        "waiting for the VNC server: %s", g_strerror(saved));
            return FALSE;
        }
        if (ready > 0)
            return TRUE;
    }
}

static void
set_closed(GError **error, const char *when)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                "the VNC server closed the connection%s", when);
}

/* Reads exactly len bytes of the handshake by deadline. */
static gboolean
read_exact(int fd, guint8 *buf, gsize len, gint64 deadline, GError **error)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = recv(fd, buf + done, len - done, 0);
        if (n > 0) {
            done += (gsize)n;
        } else if (n == 0) {
            set_closed(error, " during the handshake");
            return FALSE;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!wait_fd(fd, POLLIN, deadline, error))
                return FALSE;
        } else if (errno != EINTR) {
            int saved = errno;
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                        "reading from the VNC server: %s", g_strerror(saved));
            return FALSE;
        }
    }
    return TRUE;
}

/* Writes all of a (small) client message by deadline; MSG_NOSIGNAL: a closed peer is an error,
 * not a SIGPIPE for carreld. */
static gboolean
write_all(int fd, const guint8 *buf, gsize len, gint64 deadline, GError **error)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL);
        if (n >= 0) {
            done += (gsize)n;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!wait_fd(fd, POLLOUT, deadline, error))
                return FALSE;
        } else if (errno == EPIPE || errno == ECONNRESET) {
            set_closed(error, "");
            return FALSE;
        } else if (errno != EINTR) {
            int saved = errno;
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                        "writing to the VNC server: %s", g_strerror(saved));
            return FALSE;
        }
    }
    return TRUE;
}

/* A failure reason (u32 length, text) into the error, read up to RFB_REASON_MAX bytes. */
static void
read_reason(CarrelRfbWatch *w, gint64 deadline, CarrelErrorCode code, const char *what,
            GError **error)
{
    guint8 len_be[4];
    guint8 reason[RFB_REASON_MAX];
    g_autofree char *text = NULL;
    guint32 len;

    if (!read_exact(w->fd, len_be, sizeof len_be, deadline, NULL)) {
        g_set_error(error, CARREL_ERROR, code, "%s (no reason given)", what);
        return;
    }
    len = be32(len_be);
    if (!read_exact(w->fd, reason, MIN(len, RFB_REASON_MAX), deadline, NULL)) {
        g_set_error(error, CARREL_ERROR, code, "%s (its reason was cut short)", what);
        return;
    }
    text = printable(reason, MIN(len, RFB_REASON_MAX));
    g_set_error(error, CARREL_ERROR, code, "%s: '%s%s'", what, text,
                len > RFB_REASON_MAX ? "..." : "");
}

/* Three ASCII digits, as in "RFB 003.008\n". */
static gboolean
parse_digits(const guint8 *p, guint *ret_value)
{
    if (!g_ascii_isdigit(p[0]) || !g_ascii_isdigit(p[1]) || !g_ascii_isdigit(p[2]))
        return FALSE;
    *ret_value = (guint)(p[0] - '0') * 100 + (guint)(p[1] - '0') * 10 + (guint)(p[2] - '0');
    return TRUE;
}

/* ProtocolVersion: major 3, minor >= 7; returns the minor carrel answers with (7 or 8). */
static gboolean
handshake_version(CarrelRfbWatch *w, gint64 deadline, guint *ret_minor, GError **error)
{
    guint8 offer[12];
    guint major = 0;
    guint minor = 0;
    guint answer;
    g_autofree char *reply = NULL;

    if (!read_exact(w->fd, offer, sizeof offer, deadline, error))
        return FALSE;
    if (memcmp(offer, "RFB ", 4) != 0 || offer[7] != '.' || offer[11] != '\n' ||
        !parse_digits(offer + 4, &major) || !parse_digits(offer + 8, &minor)) {
        g_autofree char *text = printable(offer, sizeof offer);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "the VNC server did not start with an RFB version: '%s'", text);
        return FALSE;
    }
    if (major != 3 || minor < 7) {
        g_autofree char *text = printable(offer, sizeof offer - 1);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "the VNC server offers protocol '%s', carrel needs RFB 3.7 or a later 3.x",
                    text);
        return FALSE;
    }
    /* Never claim more than the server offers; 3.8 is the newest carrel knows. */
    answer = minor >= 8 ? 8 : 7;
    reply = g_strdup_printf("RFB 003.00%u\n", answer);
    if (!write_all(w->fd, (const guint8 *)reply, strlen(reply), deadline, error))
        return FALSE;
    *ret_minor = answer;
    return TRUE;
}

/* The security types offered (count 0: refused, with a reason); carrel takes None only. */
static gboolean
handshake_security(CarrelRfbWatch *w, gint64 deadline, guint minor, GError **error)
{
    guint8 count = 0;
    guint8 types[255];
    guint8 choice = RFB_SECURITY_NONE;
    guint8 result[4];
    gboolean none = FALSE;

    if (!read_exact(w->fd, &count, 1, deadline, error))
        return FALSE;
    if (count == 0) {
        read_reason(w, deadline, CARREL_ERROR_HYPERVISOR, "the VNC server refused the connection",
                    error);
        return FALSE;
    }
    if (!read_exact(w->fd, types, count, deadline, error))
        return FALSE;
    for (guint i = 0; i < count; i++)
        none = none || types[i] == RFB_SECURITY_NONE;
    if (!none) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "the VNC server asks for authentication carrel does not do (%u security "
                    "types offered, none of them 'None')",
                    count);
        return FALSE;
    }
    if (!write_all(w->fd, &choice, 1, deadline, error))
        return FALSE;
    /* RFB 3.7 sends no SecurityResult after None. */
    if (minor < 8)
        return TRUE;
    if (!read_exact(w->fd, result, sizeof result, deadline, error))
        return FALSE;
    if (be32(result) != 0) {
        read_reason(w, deadline, CARREL_ERROR_HYPERVISOR,
                    "the VNC server refused the connection after the security handshake", error);
        return FALSE;
    }
    return TRUE;
}

/* ClientInit (shared) and ServerInit: the size, a pixel format carrel replaces, the name. */
static gboolean
handshake_init(CarrelRfbWatch *w, gint64 deadline, GError **error)
{
    guint8 shared = 1;
    guint8 init[24]; /* u16 width, u16 height, 16-byte pixel format, u32 name length */
    guint8 name[CARREL_RFB_MAX_NAME];
    guint32 name_len;

    if (!write_all(w->fd, &shared, 1, deadline, error) ||
        !read_exact(w->fd, init, sizeof init, deadline, error))
        return FALSE;
    w->width = be16(init);
    w->height = be16(init + 2);
    name_len = be32(init + 20);
    if (name_len > CARREL_RFB_MAX_NAME) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "the VNC server's desktop name is too long (%" G_GUINT32_FORMAT
                    " bytes, at most %d)",
                    name_len, CARREL_RFB_MAX_NAME);
        return FALSE;
    }
    /* The name is not used: read only to stay in step. */
    return read_exact(w->fd, name, name_len, deadline, error);
}

/* SetPixelFormat: 8 bpp, depth 8, little-endian, true colour, red and green max 7, blue max 3,
 * shifts 0, 3, 6: a raw pixel is one byte, the least QEMU converts and sends. */
static const guint8 set_pixel_format[20] = {0, 0, 0, 0, 8, 8, 0, 1, 0, 7,
                                            0, 7, 0, 3, 0, 3, 6, 0, 0, 0};
/* SetEncodings: Raw (0) and the DesktopSize pseudo-encoding (-223), nothing to decode. */
static const guint8 set_encodings[12] = {2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x21};

#define RFB_REQUEST_LEN 10

/* An incremental FramebufferUpdateRequest of the whole screen at its current size. */
static void
fill_request(CarrelRfbWatch *w, guint8 *msg)
{
    msg[0] = 3;
    msg[1] = 1;
    put16(msg + 2, 0);
    put16(msg + 4, 0);
    put16(msg + 6, w->width);
    put16(msg + 8, w->height);
}

/* The pixel format, the encodings and the first update request, in one write. */
static gboolean
handshake_setup(CarrelRfbWatch *w, gint64 deadline, GError **error)
{
    guint8 msg[sizeof set_pixel_format + sizeof set_encodings + RFB_REQUEST_LEN];

    memcpy(msg, set_pixel_format, sizeof set_pixel_format);
    memcpy(msg + sizeof set_pixel_format, set_encodings, sizeof set_encodings);
    fill_request(w, msg + sizeof set_pixel_format + sizeof set_encodings);
    if (!write_all(w->fd, msg, sizeof msg, deadline, error))
        return FALSE;
    w->outstanding = TRUE;
    return TRUE;
}

CarrelRfbWatch *
carrel_rfb_watch_new_fd(int fd, guint timeout_ms, GError **error)
{
    g_autoptr(CarrelRfbWatch) w = g_new0(CarrelRfbWatch, 1);
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    guint minor = 0;
    int flags;

    w->fd = fd;
    w->state = RFB_READ_TYPE;
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "preparing the VNC socket: %s",
                    g_strerror(saved));
        return NULL;
    }
    if (!handshake_version(w, deadline, &minor, error) ||
        !handshake_security(w, deadline, minor, error) || !handshake_init(w, deadline, error) ||
        !handshake_setup(w, deadline, error))
        return NULL;
    return g_steal_pointer(&w);
}

/* A non-blocking unix connect; a full listen backlog (EAGAIN) is retried until the deadline. */
static int
connect_unix(const char *socket_path, gint64 deadline, GError **error)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(socket_path) >= sizeof addr.sun_path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "VNC socket path '%s' is too long", socket_path);
        return -1;
    }
    memcpy(addr.sun_path, socket_path, strlen(socket_path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "creating a socket: %s",
                    g_strerror(saved));
        return -1;
    }
    while (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        int saved = errno;
        if (saved == EINTR)
            continue;
        if (saved == EAGAIN && g_get_monotonic_time() < deadline) {
            g_usleep(10 * 1000);
            continue;
        }
        close(fd);
        g_set_error(error, CARREL_ERROR,
                    saved == ENOENT ? CARREL_ERROR_NOT_FOUND : CARREL_ERROR_HYPERVISOR,
                    "connecting to the VNC socket '%s': %s", socket_path, g_strerror(saved));
        return -1;
    }
    return fd;
}

CarrelRfbWatch *
carrel_rfb_watch_connect(const char *socket_path, guint timeout_ms, GError **error)
{
    gint64 start = g_get_monotonic_time();
    int fd = connect_unix(socket_path, start + (gint64)timeout_ms * 1000, error);
    gint64 spent_ms;
    CarrelRfbWatch *w;

    if (fd < 0)
        return NULL;
    spent_ms = (g_get_monotonic_time() - start) / 1000;
    w = carrel_rfb_watch_new_fd(fd, spent_ms < timeout_ms ? timeout_ms - (guint)spent_ms : 0,
                                error);
    if (!w)
        g_prefix_error(error, "VNC display at '%s': ", socket_path);
    return w;
}

/* A rectangle's payload is consumed (or it had none). */
static void
rect_done(CarrelRfbWatch *w)
{
    if (--w->rects_left > 0)
        return;
    w->changed = TRUE;
    w->outstanding = FALSE;
    w->state = RFB_READ_TYPE;
}

static gboolean protocol_error(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

static gboolean
protocol_error(GError **error, const char *format, ...)
{
    va_list args;
    g_autofree char *text = NULL;

    va_start(args, format);
    text = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "the VNC server %s", text);
    return FALSE;
}

static gboolean
handle_type(CarrelRfbWatch *w, GError **error)
{
    switch (w->head[0]) {
    case RFB_MSG_UPDATE:
        w->state = RFB_READ_UPDATE;
        return TRUE;
    case RFB_MSG_COLOURS:
        w->state = RFB_READ_COLOURS;
        return TRUE;
    case RFB_MSG_BELL:
        return TRUE;
    case RFB_MSG_CUT_TEXT:
        w->state = RFB_READ_CUT;
        return TRUE;
    default:
        return protocol_error(error, "sent an unknown message type %u", w->head[0]);
    }
}

static gboolean
handle_rect(CarrelRfbWatch *w, GError **error)
{
    guint x = be16(w->head), y = be16(w->head + 2);
    guint width = be16(w->head + 4), height = be16(w->head + 6);
    gint32 encoding = (gint32)be32(w->head + 8);

    if (encoding == RFB_ENCODING_DESKTOP_SIZE) {
        w->width = width;
        w->height = height;
        rect_done(w);
        return TRUE;
    }
    if (encoding != RFB_ENCODING_RAW)
        return protocol_error(error,
                              "sent a rectangle in encoding %" G_GINT32_FORMAT
                              ", which carrel did not ask for",
                              encoding);
    /* u16 + u16 cannot wrap in guint. */
    if (x + width > w->width || y + height > w->height)
        return protocol_error(error, "sent a rectangle %ux%u at %u,%u outside its %ux%u screen",
                              width, height, x, y, w->width, w->height);
    /* One byte per pixel (SetPixelFormat, 8 bpp); guint64 keeps any w*h exact. */
    w->skip = (guint64)width * height;
    if (w->skip == 0)
        rect_done(w);
    else
        w->skip_ends_rect = TRUE;
    return TRUE;
}

/* The fixed part of the current message is complete in w->head. */
static gboolean
handle_head(CarrelRfbWatch *w, GError **error)
{
    switch (w->state) {
    case RFB_READ_TYPE:
        return handle_type(w, error);
    case RFB_READ_UPDATE:
        w->rects_left = be16(w->head + 1);
        if (w->rects_left > 0) {
            w->state = RFB_READ_RECT;
        } else {
            /* An empty update answers the request without a change. */
            w->outstanding = FALSE;
            w->state = RFB_READ_TYPE;
        }
        return TRUE;
    case RFB_READ_RECT:
        return handle_rect(w, error);
    case RFB_READ_COLOURS:
        w->skip = (guint64)be16(w->head + 3) * 6;
        w->state = RFB_READ_TYPE;
        return TRUE;
    case RFB_READ_CUT:
        w->skip = be32(w->head + 3);
        w->state = RFB_READ_TYPE;
        return TRUE;
    case RFB_READ_LAST:
    default:
        break;
    }
    g_assert_not_reached();
    return FALSE;
}

/* Runs the state machine over data; a message may be split anywhere between calls. */
static gboolean
feed(CarrelRfbWatch *w, const guint8 *data, gsize len, GError **error)
{
    while (len > 0) {
        gsize want = head_sizes[w->state];
        gsize n;

        if (w->skip > 0) {
            n = (gsize)MIN(w->skip, (guint64)len);
            w->skip -= n;
            data += n;
            len -= n;
            if (w->skip == 0 && w->skip_ends_rect) {
                w->skip_ends_rect = FALSE;
                rect_done(w);
            }
            continue;
        }
        n = MIN(want - w->head_len, len);
        memcpy(w->head + w->head_len, data, n);
        w->head_len += n;
        data += n;
        len -= n;
        if (w->head_len == want) {
            w->head_len = 0;
            if (!handle_head(w, error))
                return FALSE;
        }
    }
    return TRUE;
}

static gboolean
check_usable(CarrelRfbWatch *w, GError **error)
{
    if (w->failed) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "the VNC connection failed earlier");
        return FALSE;
    }
    return TRUE;
}

/* Reads and parses what is waiting; FALSE on EOF, a read error or a protocol error. */
static gboolean
drain(CarrelRfbWatch *w, GError **error)
{
    guint8 chunk[16 * 1024];
    gsize total = 0;

    while (total < RFB_POLL_MAX_BYTES) {
        ssize_t n = recv(w->fd, chunk, sizeof chunk, 0);
        if (n > 0) {
            total += (gsize)n;
            if (!feed(w, chunk, (gsize)n, error))
                return FALSE;
        } else if (n == 0) {
            set_closed(error, "");
            return FALSE;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return TRUE;
        } else if (errno != EINTR) {
            int saved = errno;
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                        "reading from the VNC server: %s", g_strerror(saved));
            return FALSE;
        }
    }
    return TRUE;
}

gboolean
carrel_rfb_watch_poll(CarrelRfbWatch *w, gboolean *ret_changed, GError **error)
{
    if (!check_usable(w, error))
        return FALSE;
    if (!drain(w, error)) {
        w->failed = TRUE;
        return FALSE;
    }
    *ret_changed = w->changed;
    w->changed = FALSE;
    return TRUE;
}

gboolean
carrel_rfb_watch_request(CarrelRfbWatch *w, GError **error)
{
    guint8 msg[RFB_REQUEST_LEN];

    if (!check_usable(w, error))
        return FALSE;
    if (w->outstanding)
        return TRUE;
    fill_request(w, msg);
    if (!write_all(w->fd, msg, sizeof msg, g_get_monotonic_time() + RFB_WRITE_WAIT_MS * 1000,
                   error)) {
        /* Part of the message may be out: the stream is no longer in step. */
        w->failed = TRUE;
        return FALSE;
    }
    w->outstanding = TRUE;
    return TRUE;
}

int
carrel_rfb_watch_fd(CarrelRfbWatch *w)
{
    return w->fd;
}

guint
carrel_rfb_watch_width(CarrelRfbWatch *w)
{
    return w->width;
}

guint
carrel_rfb_watch_height(CarrelRfbWatch *w)
{
    return w->height;
}

gsize
carrel_rfb_watch_held_bytes(CarrelRfbWatch *w)
{
    return w->head_len;
}

void
carrel_rfb_watch_free(CarrelRfbWatch *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    g_free(w);
}
