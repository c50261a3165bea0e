/* cli-progress: the one-line progress display of long jobs on a terminal; pure, no I/O. */
#include <string.h>

#include "cli/cli-format.h"

#define PROGRESS_BAR_MAX 20
#define PROGRESS_BAR_MIN_WIDTH 40 /* narrower terminals get the percentage without a bar */

/* "[=====>    ]  42%" or " 42%": percent of done in total, clamped to 0..100. */
static void
append_bar(GString *line, gint64 done, gint64 total, guint width)
{
    gint64 clamped = CLAMP(done, 0, total);
    guint percent = (guint)(clamped * 100 / total);
    guint bar = MIN(PROGRESS_BAR_MAX, width / 4);

    if (width >= PROGRESS_BAR_MIN_WIDTH) {
        guint filled = (guint)(clamped * bar / total);

        g_string_append_c(line, '[');
        for (guint i = 0; i < bar; i++)
            g_string_append_c(line, i < filled ? '=' : (i == filled ? '>' : ' '));
        g_string_append(line, "] ");
    }
    g_string_append_printf(line, "%3u%%", percent);
}

static void
append_counts(GString *line, const CarrelCliProgress *progress)
{
    g_autofree char *done = NULL;
    g_autofree char *total = NULL;

    if (progress->done < 0)
        return;
    if (!progress->bytes) {
        if (progress->total > 0)
            g_string_append_printf(line, " %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT,
                                   MIN(progress->done, progress->total), progress->total);
        return;
    }
    done = carrel_cli_format_size((guint64)progress->done);
    if (progress->total <= 0) {
        g_string_append_printf(line, "%s%s", line->len ? " " : "", done);
        return;
    }
    g_free(done);
    done = carrel_cli_format_size((guint64)MIN(progress->done, progress->total));
    total = carrel_cli_format_size((guint64)progress->total);
    g_string_append_printf(line, " %s / %s", done, total);
}

/* line cut to width characters, "..." marking the cut when there is room for it. */
static char *
truncate_to(GString *line, guint width)
{
    const char *cut;

    if (g_utf8_strlen(line->str, -1) <= (glong)width)
        return g_string_free(line, FALSE);
    if (width <= 3) {
        cut = g_utf8_offset_to_pointer(line->str, width);
        g_string_truncate(line, (gsize)(cut - line->str));
        return g_string_free(line, FALSE);
    }
    cut = g_utf8_offset_to_pointer(line->str, width - 3);
    g_string_truncate(line, (gsize)(cut - line->str));
    g_string_append(line, "...");
    return g_string_free(line, FALSE);
}

char *
carrel_cli_progress_render(const CarrelCliProgress *progress, guint width)
{
    GString *line = g_string_new(NULL);

    if (progress->total > 0 && progress->done >= 0)
        append_bar(line, progress->done, progress->total, width);
    append_counts(line, progress);
    if (progress->text && *progress->text) {
        g_autofree char *clean = carrel_cli_clean_text(progress->text);

        g_string_append_printf(line, "%s%s", line->len ? "  " : "", clean);
    }
    return truncate_to(line, width);
}
