/*
 * QEMU's migration stream as QEMU 7.2 writes it into a save image: one RAM block's pages taken
 * out of it (pure: bytes in, the rest of the stream and the block's pages out).
 *
 * Why: a snapshot of a session whose RAM maps a file privately (a warm clone, carrel-qemu) saves
 * all of that RAM (150 MB of tiny's 512 MiB), and every revert and fork of it loaded it page by
 * page. Split, the pages go into a RAM file of the snapshot's own, which the restored guest maps
 * privately as a warm clone maps its template's, and the save keeps the device state (6 MB).
 *
 * The stream: "QEVM", version 3; the configuration section (the machine type, then the
 * capabilities the source ran with, which the destination checks against its own); the RAM's
 * iterative section (START, PARTs, END), each part a run of records (a be64 of offset | flags,
 * the block's name unless CONTINUE, a page or a fill byte) closed by EOS and a footer; then the
 * device sections, copied as they are. Anything else before the RAM's END (another iterative
 * section, a record kind a save here never has: XBZRLE, compressed pages) is refused, and the
 * caller keeps the save whole.
 */
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

#define STREAM_MAGIC 0x5145564dU /* "QEVM" */
#define STREAM_VERSION 3U
#define PAGE_SIZE 4096U

enum {
    VM_SECTION_START = 0x01,
    VM_SECTION_PART = 0x02,
    VM_SECTION_END = 0x03,
    VM_SUBSECTION = 0x05,
    VM_CONFIGURATION = 0x07,
    VM_SECTION_FOOTER = 0x7e,
};

enum {
    RAM_ZERO = 0x02,
    RAM_MEM_SIZE = 0x04,
    RAM_PAGE = 0x08,
    RAM_EOS = 0x10,
    RAM_CONTINUE = 0x20,
};

#define CAPABILITIES "configuration/capabilities"
#define IGNORE_SHARED "x-ignore-shared"

typedef struct {
    const guint8 *data;
    gsize len;
    gsize pos;
    GByteArray *out;    /* what the device stream keeps */
    const char *block;  /* the block taken out */
    guint64 block_size; /* its size, from the MEM_SIZE record; 0 until then */
    gboolean ignore_shared;
    char last[256]; /* the block of the last record: CONTINUE records name none */
    CarrelRamPageFunc page;
    gpointer user_data;
} Stream;

static gboolean
fail(Stream *s, GError **error, const char *what)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                "migration stream at byte %" G_GSIZE_FORMAT ": %s", s->pos, what);
    return FALSE;
}

static gboolean
take(Stream *s, gsize n, const guint8 **ret, GError **error)
{
    if (s->len - s->pos < n)
        return fail(s, error, "ends early");
    *ret = s->data + s->pos;
    s->pos += n;
    return TRUE;
}

static gboolean
get_u8(Stream *s, guint8 *ret, GError **error)
{
    const guint8 *p;

    if (!take(s, 1, &p, error))
        return FALSE;
    *ret = p[0];
    return TRUE;
}

static gboolean
get_be32(Stream *s, guint32 *ret, GError **error)
{
    const guint8 *p;

    if (!take(s, 4, &p, error))
        return FALSE;
    *ret = ((guint32)p[0] << 24) | ((guint32)p[1] << 16) | ((guint32)p[2] << 8) | p[3];
    return TRUE;
}

static gboolean
get_be64(Stream *s, guint64 *ret, GError **error)
{
    guint32 hi, lo;

    if (!get_be32(s, &hi, error) || !get_be32(s, &lo, error))
        return FALSE;
    *ret = ((guint64)hi << 32) | lo;
    return TRUE;
}

/* A name: a length byte and that many bytes, NUL-terminated into buf (256 bytes). */
static gboolean
get_name(Stream *s, char *buf, GError **error)
{
    const guint8 *p;
    guint8 n;

    if (!get_u8(s, &n, error) || !take(s, n, &p, error))
        return FALSE;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return TRUE;
}

/* Bytes from start to here go to the device stream. */
static void
keep_from(Stream *s, gsize start)
{
    g_byte_array_append(s->out, s->data + start, (guint)(s->pos - start));
}

/* The configuration section: the machine type, then subsections; only the capabilities one is
 * known, and it must hold x-ignore-shared (the block list then gives each block's address). */
static gboolean
configuration(Stream *s, GError **error)
{
    gsize start = s->pos;
    const guint8 *p;
    guint32 len, version, count;
    guint8 type;
    char name[256];

    if (!get_u8(s, &type, error))
        return FALSE;
    if (type != VM_CONFIGURATION)
        return fail(s, error, "no configuration section");
    if (!get_be32(s, &len, error))
        return FALSE;
    if (len > 255)
        return fail(s, error, "a machine type too long");
    if (!take(s, len, &p, error))
        return FALSE;
    while (s->pos < s->len && s->data[s->pos] == VM_SUBSECTION) {
        s->pos++;
        if (!get_name(s, name, error) || !get_be32(s, &version, error))
            return FALSE;
        if (!g_str_equal(name, CAPABILITIES))
            return fail(s, error, "unknown subsection of the configuration");
        if (!get_be32(s, &count, error))
            return FALSE;
        if (count > 64)
            return fail(s, error, "too many capabilities");
        for (guint32 i = 0; i < count; i++) {
            if (!get_name(s, name, error))
                return FALSE;
            s->ignore_shared = s->ignore_shared || g_str_equal(name, IGNORE_SHARED);
        }
    }
    if (!s->ignore_shared)
        return fail(s, error, "the source ran without x-ignore-shared");
    keep_from(s, start);
    return TRUE;
}

/* The MEM_SIZE record's block list: names, sizes and addresses, as many as add up to total. */
static gboolean
block_list(Stream *s, guint64 total, GError **error)
{
    guint64 sum = 0, size, addr;
    char name[256];

    while (sum < total) {
        if (!get_name(s, name, error) || !get_be64(s, &size, error) || !get_be64(s, &addr, error))
            return FALSE;
        if (size == 0 || size > total - sum)
            return fail(s, error, "block sizes do not add up");
        if (g_str_equal(name, s->block))
            s->block_size = size;
        sum += size;
    }
    if (s->block_size == 0 || s->block_size % PAGE_SIZE != 0)
        return fail(s, error, "the RAM block is not in the block list");
    return TRUE;
}

/* One page or fill record (the header read): passed on when of the block, else kept. */
static gboolean
page_record(Stream *s, gsize start, guint64 offset, guint flags, GError **error)
{
    const guint8 *page = NULL;
    guint8 fill = 0;

    if (!(flags & RAM_CONTINUE) && !get_name(s, s->last, error))
        return FALSE;
    if (!s->last[0])
        return fail(s, error, "a page continues no block");
    if ((flags & RAM_ZERO) ? !get_u8(s, &fill, error) : !take(s, PAGE_SIZE, &page, error))
        return FALSE;
    if (!g_str_equal(s->last, s->block)) {
        keep_from(s, start);
        return TRUE;
    }
    if (s->block_size == 0 || offset > s->block_size - PAGE_SIZE)
        return fail(s, error, "a page outside the RAM block");
    return s->page(s->block_size, offset, page, fill, s->user_data, error);
}

/* One part of the RAM section: records up to EOS. */
static gboolean
ram_records(Stream *s, GError **error)
{
    for (;;) {
        gsize start = s->pos;
        guint64 header, offset;
        guint flags;

        if (!get_be64(s, &header, error))
            return FALSE;
        flags = (guint)(header & (PAGE_SIZE - 1));
        offset = header & ~(guint64)(PAGE_SIZE - 1);
        if (flags == RAM_EOS) {
            keep_from(s, start);
            return TRUE;
        }
        if (flags == RAM_MEM_SIZE) {
            if (!block_list(s, offset, error))
                return FALSE;
            keep_from(s, start);
            continue;
        }
        if ((flags & ~(guint)RAM_CONTINUE) != RAM_ZERO &&
            (flags & ~(guint)RAM_CONTINUE) != RAM_PAGE)
            return fail(s, error, "a RAM record of a kind saves here never have");
        if (!page_record(s, start, offset, flags, error))
            return FALSE;
    }
}

/* A section's footer: its marker and the section's id. */
static gboolean
footer(Stream *s, guint32 id, GError **error)
{
    gsize start = s->pos;
    guint32 got;
    guint8 type;

    if (!get_u8(s, &type, error) || !get_be32(s, &got, error))
        return FALSE;
    if (type != VM_SECTION_FOOTER || got != id)
        return fail(s, error, "a section without its footer");
    keep_from(s, start);
    return TRUE;
}

/* The RAM's START, PARTs and END; TRUE once END's footer is read. */
static gboolean
ram_sections(Stream *s, GError **error)
{
    guint32 ram_id = 0, id, instance, version;
    gboolean started = FALSE;
    char name[256];
    guint8 type;

    for (;;) {
        gsize start = s->pos;

        if (!get_u8(s, &type, error) || !get_be32(s, &id, error))
            return FALSE;
        if (type == VM_SECTION_START && !started) {
            if (!get_name(s, name, error) || !get_be32(s, &instance, error) ||
                !get_be32(s, &version, error))
                return FALSE;
            if (!g_str_equal(name, "ram") || version != 4)
                return fail(s, error, "the first section is not RAM (version 4)");
            ram_id = id;
            started = TRUE;
        } else if ((type != VM_SECTION_PART && type != VM_SECTION_END) || !started ||
                   id != ram_id) {
            return fail(s, error, "a section other than RAM's before its end");
        }
        keep_from(s, start);
        if (!ram_records(s, error) || !footer(s, id, error))
            return FALSE;
        if (type == VM_SECTION_END)
            return TRUE;
    }
}

gboolean
carrel_hypervisor_migstream_split(const guint8 *stream, gsize len, const char *block,
                                  GByteArray *out, guint64 *ret_block_size, CarrelRamPageFunc page,
                                  gpointer user_data, GError **error)
{
    Stream s = {.data = stream,
                .len = len,
                .out = out,
                .block = block,
                .page = page,
                .user_data = user_data};
    guint32 magic, version;
    gsize rest;

    if (!get_be32(&s, &magic, error) || !get_be32(&s, &version, error))
        return FALSE;
    if (magic != STREAM_MAGIC || version != STREAM_VERSION)
        return fail(&s, error, "not a version 3 QEMU migration stream");
    keep_from(&s, 0);
    if (!configuration(&s, error) || !ram_sections(&s, error))
        return FALSE;
    /* The device sections and the end, as they are. */
    rest = s.pos;
    s.pos = len;
    keep_from(&s, rest);
    *ret_block_size = s.block_size;
    return TRUE;
}
