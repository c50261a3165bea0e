/* Command-line parsing: pure, so the unit tests cover it without a display. */
#include <math.h>

#include "guest.h"

typedef enum {
    OPT_DISPLAY = 1 << 0,
    OPT_XAUTHORITY = 1 << 1,
    OPT_USER = 1 << 2,
    OPT_TIMEOUT = 1 << 3,
    OPT_STDIN = 1 << 4,
    OPT_PARENTS = 1 << 5,
    OPT_RECURSIVE = 1 << 6,
    OPT_WINDOW = 1 << 7,
    OPT_DEPTH = 1 << 8,
    OPT_MAX_NODES = 1 << 9,
    OPT_PTY = 1 << 10,
    OPT_ROWS = 1 << 11,
    OPT_COLS = 1 << 12,
    OPT_APP = 1 << 13,
} OptionBit;

#define OPT_X (OPT_DISPLAY | OPT_XAUTHORITY)

typedef struct {
    const char *word;
    const char *sub;
    CarrelGuestCommand command;
    guint allowed;
    guint min_args;
    guint max_args;
} CommandSpec;

static const CommandSpec commands[] = {
    {"ready", NULL, CARREL_GUEST_COMMAND_READY, OPT_X | OPT_TIMEOUT, 0, 0},
    {"windows", NULL, CARREL_GUEST_COMMAND_WINDOWS, OPT_X, 0, 0},
    {"clipboard", "get", CARREL_GUEST_COMMAND_CLIPBOARD_GET, OPT_X | OPT_TIMEOUT, 0, 0},
    {"clipboard", "set", CARREL_GUEST_COMMAND_CLIPBOARD_SET, OPT_X | OPT_TIMEOUT | OPT_STDIN, 0, 1},
    {"type", NULL, CARREL_GUEST_COMMAND_TYPE, OPT_X | OPT_TIMEOUT | OPT_STDIN, 0, 1},
    {"launch", NULL, CARREL_GUEST_COMMAND_LAUNCH, OPT_X | OPT_USER, 1, CARREL_GUEST_LIMIT_ARGS},
    {"open", NULL, CARREL_GUEST_COMMAND_OPEN, OPT_X | OPT_USER, 1, 1},
    {"set-mac", NULL, CARREL_GUEST_COMMAND_SET_MAC, 0, 1, 1},
    {"set-net", NULL, CARREL_GUEST_COMMAND_SET_NET, 0, 1, 3},
    {"screen", NULL, CARREL_GUEST_COMMAND_SCREEN, OPT_X | OPT_TIMEOUT, 1, 1},
    {"fs", "list", CARREL_GUEST_COMMAND_FS_LIST, 0, 1, 1},
    {"fs", "stat", CARREL_GUEST_COMMAND_FS_STAT, 0, 1, 1},
    {"fs", "mkdir", CARREL_GUEST_COMMAND_FS_MKDIR, OPT_PARENTS, 1, 1},
    {"fs", "remove", CARREL_GUEST_COMMAND_FS_REMOVE, OPT_RECURSIVE, 1, 1},
    {"fs", "move", CARREL_GUEST_COMMAND_FS_MOVE, 0, 2, 2},
    {"proc", "start", CARREL_GUEST_COMMAND_PROC_START, OPT_PTY | OPT_ROWS | OPT_COLS | OPT_USER, 1,
     CARREL_GUEST_LIMIT_ARGS},
    {"proc", "read", CARREL_GUEST_COMMAND_PROC_READ, OPT_TIMEOUT, 1, 3},
    {"proc", "write", CARREL_GUEST_COMMAND_PROC_WRITE, OPT_STDIN | OPT_TIMEOUT, 1, 1},
    {"proc", "close", CARREL_GUEST_COMMAND_PROC_CLOSE, 0, 1, 1},
    {"proc", "kill", CARREL_GUEST_COMMAND_PROC_KILL, 0, 1, 2},
    {"proc", "list", CARREL_GUEST_COMMAND_PROC_LIST, 0, 0, 0},
    {"a11y", "tree", CARREL_GUEST_COMMAND_A11Y_TREE,
     OPT_X | OPT_TIMEOUT | OPT_WINDOW | OPT_DEPTH | OPT_MAX_NODES | OPT_APP, 0, 0},
    {"a11y", "node", CARREL_GUEST_COMMAND_A11Y_NODE, OPT_X | OPT_TIMEOUT, 1, 1},
    {"a11y", "action", CARREL_GUEST_COMMAND_A11Y_ACTION, OPT_X | OPT_TIMEOUT, 1, 1},
    {"proc", "resize", CARREL_GUEST_COMMAND_PROC_RESIZE, 0, 3, 3},
    {"version", NULL, CARREL_GUEST_COMMAND_VERSION, 0, 0, 0},
    {"help", NULL, CARREL_GUEST_COMMAND_HELP, 0, 0, 0},
};

static const struct {
    const char *name;
    OptionBit bit;
    gboolean takes_value;
} option_specs[] = {
    {"display", OPT_DISPLAY, TRUE},
    {"xauthority", OPT_XAUTHORITY, TRUE},
    {"user", OPT_USER, TRUE},
    {"timeout", OPT_TIMEOUT, TRUE},
    {"stdin", OPT_STDIN, FALSE},
    {"parents", OPT_PARENTS, FALSE},
    {"recursive", OPT_RECURSIVE, FALSE},
    {"window", OPT_WINDOW, TRUE},
    {"depth", OPT_DEPTH, TRUE},
    {"max-nodes", OPT_MAX_NODES, TRUE},
    {"app", OPT_APP, TRUE},
    {"pty", OPT_PTY, FALSE},
    {"rows", OPT_ROWS, TRUE},
    {"cols", OPT_COLS, TRUE},
};

typedef struct {
    CarrelGuestOptions *options;
    guint seen;
    gboolean help;
    gboolean rest_positional;
    GPtrArray *words;
} Parser;

static const char usage_text[] =
    "usage: carrel-guest [OPTIONS] COMMAND [ARGS...]\n"
    "\n"
    "Commands (each prints one JSON object on stdout; errors print {\"error\":{...}} and exit\n"
    "non-zero):\n"
    "  ready [--timeout S]          wait until the display answers and a window manager runs\n"
    "  windows                      list the top-level application windows\n"
    "  clipboard get [--timeout S]  print the CLIPBOARD text\n"
    "  clipboard set TEXT|--stdin   own CLIPBOARD and PRIMARY (a background process serves them)\n"
    "  type TEXT|--stdin            type UTF-8 text into the focused window (XTest; characters\n"
    "                               the keymap lacks go through a spare keycode, remapped)\n"
    "  launch [--user U] APP [ARGS...]  start a program in the desktop session\n"
    "  open [--user U] PATH|URL     open a file or URL with the desktop's default program\n"
    "  set-mac MAC                  give the one network device this MAC (as root)\n"
    "  set-net ADDR/PREFIX GATEWAY DNS  give it this IPv4 address, default route and name\n"
    "                               server (as root)\n"
    "  set-net none                 take its IPv4 addresses, default route and name server away\n"
    "  screen WxH [--timeout S]     set the display's size (XRandR; a CVT mode is added when the\n"
    "                               output has none of that size)\n"
    "  fs list PATH                 list a directory (lstat of every entry, sorted by name)\n"
    "  fs stat PATH                 lstat one path\n"
    "  fs mkdir [--parents] PATH    create a directory (--parents: and missing parents)\n"
    "  fs remove [--recursive] PATH remove a file, symlink or empty directory (--recursive: a\n"
    "                               whole tree, symlinks not followed)\n"
    "  fs move SOURCE DEST          rename(2) SOURCE to DEST, which must not exist\n"
    "  proc start -- PROGRAM [ARGS...]  run a program detached, its output spooled (as root)\n"
    "  proc read HANDLE [OUT [ERR]] its state and new output from these byte offsets (base64);\n"
    "                               --timeout S waits up to S (at most 10) for output or its end\n"
    "  proc write HANDLE --stdin    pass this program's input on to the process's\n"
    "  proc close HANDLE            end the process's input\n"
    "  proc kill HANDLE [SIGNAL]    signal its process group (default 15, TERM)\n"
    "  proc list                    the handles, oldest first\n"
    "  a11y tree [--window focused|all] [--depth N] [--max-nodes N] [--app NAME]  the\n"
    "                               accessibility\n"
    "                               (AT-SPI) tree of the focused window or the whole desktop\n"
    "  a11y node ID                 one element of that tree, without its children\n"
    "  a11y action ID               run the element's default action (AT-SPI DoAction 0)\n"
    "  proc start --pty [--rows R] [--cols C] [--user U] [-- PROGRAM [ARGS...]]\n"
    "                               the same on a pseudo-terminal, as U (default: user), a\n"
    "                               login shell (/bin/bash -l) without a program\n"
    "  proc resize HANDLE ROWS COLS the terminal size of a --pty process\n"
    "  version                      print the version\n"
    "\n"
    "Options:\n"
    "  --display D      X display (default :0)\n"
    "  --xauthority F   X cookie file (default: the session's, found automatically)\n"
    "  --user U         desktop user for launch/open (default: the session's user)\n"
    "  --timeout S      seconds to wait (ready: 60, clipboard: 5, type: 60, screen: 20,\n"
    "                   proc read: 0; at most 3600)\n"
    "  --parents        fs mkdir: create missing parents, and succeed if PATH is a directory\n"
    "  --recursive      fs remove: remove a directory with everything in it\n"
    "  --window W       a11y tree: focused (default) or all\n"
    "  --depth N        a11y tree: levels below the root (default 12, at most 64)\n"
    "  --max-nodes N    a11y tree: elements in the reply (default 500, at most 5000)\n"
    "  --app NAME       a11y tree: the desktop with that application only (its AT-SPI name)\n";

const char *
carrel_guest_usage(void)
{
    return usage_text;
}

const char *
carrel_guest_command_to_string(CarrelGuestCommand command)
{
    static const struct {
        CarrelGuestCommand command;
        const char *name;
    } two_words[] = {
        {CARREL_GUEST_COMMAND_CLIPBOARD_GET, "clipboard get"},
        {CARREL_GUEST_COMMAND_CLIPBOARD_SET, "clipboard set"},
        {CARREL_GUEST_COMMAND_FS_LIST, "fs list"},
        {CARREL_GUEST_COMMAND_FS_STAT, "fs stat"},
        {CARREL_GUEST_COMMAND_FS_MKDIR, "fs mkdir"},
        {CARREL_GUEST_COMMAND_FS_REMOVE, "fs remove"},
        {CARREL_GUEST_COMMAND_FS_MOVE, "fs move"},
        {CARREL_GUEST_COMMAND_PROC_START, "proc start"},
        {CARREL_GUEST_COMMAND_PROC_READ, "proc read"},
        {CARREL_GUEST_COMMAND_PROC_WRITE, "proc write"},
        {CARREL_GUEST_COMMAND_PROC_CLOSE, "proc close"},
        {CARREL_GUEST_COMMAND_PROC_KILL, "proc kill"},
        {CARREL_GUEST_COMMAND_PROC_LIST, "proc list"},
        {CARREL_GUEST_COMMAND_A11Y_TREE, "a11y tree"},
        {CARREL_GUEST_COMMAND_A11Y_NODE, "a11y node"},
        {CARREL_GUEST_COMMAND_A11Y_ACTION, "a11y action"},
        {CARREL_GUEST_COMMAND_PROC_RESIZE, "proc resize"},
    };

    for (guint i = 0; i < G_N_ELEMENTS(two_words); i++) {
        if (two_words[i].command == command)
            return two_words[i].name;
    }
    for (guint i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (commands[i].command == command)
            return commands[i].word;
    }
    return "unknown";
}

void
carrel_guest_options_free(CarrelGuestOptions *options)
{
    if (!options)
        return;
    g_free(options->display);
    g_free(options->xauthority);
    g_free(options->user);
    g_free(options->a11y_app);
    g_free(options->text);
    g_strfreev(options->argv);
    g_free(options);
}

static gboolean
is_valid_user_name(const char *name)
{
    gsize len = strlen(name);

    if (len == 0 || len > CARREL_GUEST_LIMIT_USER_LEN)
        return FALSE;
    if (!g_ascii_isalpha(name[0]) && name[0] != '_')
        return FALSE;
    for (gsize i = 1; i < len; i++) {
        if (!g_ascii_isalnum(name[i]) && !strchr("_.-", name[i]))
            return FALSE;
    }
    return TRUE;
}

/* An application's name as AT-SPI gives it: one line of UTF-8, no control characters. */
static gboolean
is_valid_app_name(const char *name)
{
    gsize len = strlen(name);

    if (len == 0 || len > CARREL_GUEST_LIMIT_A11Y_APP_BYTES || !g_utf8_validate(name, -1, NULL))
        return FALSE;
    for (const char *p = name; *p; p = g_utf8_next_char(p)) {
        if (g_unichar_iscntrl(g_utf8_get_char(p)))
            return FALSE;
    }
    return TRUE;
}

gboolean
carrel_guest_pty_size_parse(const char *value, guint *ret_size, GError **error)
{
    guint64 n = 0;

    if (!g_ascii_string_to_unsigned(value, 10, 1, CARREL_GUEST_LIMIT_PTY_SIZE, &n, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "invalid terminal size '%s': expected 1 to %d", value,
                    CARREL_GUEST_LIMIT_PTY_SIZE);
        return FALSE;
    }
    *ret_size = (guint)n;
    return TRUE;
}

static gboolean
parse_timeout(const char *value, gint64 *ret_ms, GError **error)
{
    char *end = NULL;
    double seconds = g_ascii_strtod(value, &end);

    if (!end || end == value || *end != '\0' || !isfinite(seconds) || seconds < 0 ||
        seconds * 1000 > CARREL_GUEST_LIMIT_TIMEOUT_MS) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "invalid timeout '%s': expected seconds between 0 and 3600", value);
        return FALSE;
    }
    *ret_ms = (gint64)(seconds * 1000);
    return TRUE;
}

static gboolean
parse_count(const char *value, guint min, guint max, guint *ret_value, GError **error)
{
    guint64 n = 0;

    if (!g_ascii_string_to_unsigned(value, 10, min, max, &n, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "invalid count '%s': expected %u to %u", value, min, max);
        return FALSE;
    }
    *ret_value = (guint)n;
    return TRUE;
}

static gboolean
set_option(Parser *parser, OptionBit bit, const char *value, GError **error)
{
    CarrelGuestOptions *options = parser->options;

    switch (bit) {
    case OPT_DISPLAY:
        if (!carrel_guest_display_number(value, NULL))
            break;
        options->display = g_strdup(value);
        return TRUE;
    case OPT_XAUTHORITY:
        if (!g_path_is_absolute(value) || strlen(value) > CARREL_GUEST_LIMIT_PATH_LEN)
            break;
        options->xauthority = g_strdup(value);
        return TRUE;
    case OPT_USER:
        if (!is_valid_user_name(value))
            break;
        options->user = g_strdup(value);
        return TRUE;
    case OPT_TIMEOUT:
        return parse_timeout(value, &options->timeout_ms, error);
    case OPT_STDIN:
        options->use_stdin = TRUE;
        return TRUE;
    case OPT_PARENTS:
        options->parents = TRUE;
        return TRUE;
    case OPT_RECURSIVE:
        options->recursive = TRUE;
        return TRUE;
    case OPT_WINDOW:
        if (!g_str_equal(value, "focused") && !g_str_equal(value, "all"))
            break;
        options->a11y_all = g_str_equal(value, "all");
        return TRUE;
    case OPT_DEPTH:
        return parse_count(value, 0, CARREL_GUEST_LIMIT_A11Y_DEPTH, &options->depth, error);
    case OPT_MAX_NODES:
        return parse_count(value, 1, CARREL_GUEST_LIMIT_A11Y_NODES, &options->max_nodes, error);
    case OPT_APP:
        if (!is_valid_app_name(value))
            break;
        g_free(options->a11y_app);
        options->a11y_app = g_strdup(value);
        options->a11y_all = TRUE;
        return TRUE;
    case OPT_PTY:
        options->pty = TRUE;
        return TRUE;
    case OPT_ROWS:
        return carrel_guest_pty_size_parse(value, &options->rows, error);
    case OPT_COLS:
        return carrel_guest_pty_size_parse(value, &options->cols, error);
    }
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG, "invalid value '%s'",
                value);
    return FALSE;
}

static gboolean
parse_option(Parser *parser, int argc, char **argv, int *index, GError **error)
{
    const char *arg = argv[*index];
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    g_autofree char *key = eq ? g_strndup(name, (gsize)(eq - name)) : g_strdup(name);
    const char *value = eq ? eq + 1 : NULL;

    if (g_str_equal(arg, "-h") || g_str_equal(arg, "--help")) {
        parser->help = TRUE;
        return TRUE;
    }
    for (guint i = 0; g_str_has_prefix(arg, "--") && i < G_N_ELEMENTS(option_specs); i++) {
        if (!g_str_equal(key, option_specs[i].name))
            continue;
        if (parser->seen & option_specs[i].bit) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                        "option '--%s' given twice", key);
            return FALSE;
        }
        parser->seen |= option_specs[i].bit;
        if (option_specs[i].takes_value && !value) {
            if (*index + 1 >= argc) {
                g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                            "option '--%s' needs a value", key);
                return FALSE;
            }
            value = argv[++*index];
        } else if (!option_specs[i].takes_value && value) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                        "option '--%s' takes no value", key);
            return FALSE;
        }
        if (!set_option(parser, option_specs[i].bit, value ? value : "", error)) {
            g_prefix_error(error, "option '--%s': ", key);
            return FALSE;
        }
        return TRUE;
    }
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG, "unknown option '%s'",
                arg);
    return FALSE;
}

static gboolean
split_words(Parser *parser, int argc, char **argv, GError **error)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];

        /* launch passes everything after the program name through untouched. */
        if (parser->words->len >= 2 && g_str_equal(g_ptr_array_index(parser->words, 0), "launch"))
            parser->rest_positional = TRUE;
        /* So does proc start after its program's name. */
        if (parser->words->len >= 3 && g_str_equal(g_ptr_array_index(parser->words, 0), "proc") &&
            g_str_equal(g_ptr_array_index(parser->words, 1), "start"))
            parser->rest_positional = TRUE;
        if (!parser->rest_positional && g_str_equal(arg, "--")) {
            parser->rest_positional = TRUE;
            continue;
        }
        if (!parser->rest_positional && arg[0] == '-' && arg[1] != '\0') {
            if (!parse_option(parser, argc, argv, &i, error))
                return FALSE;
            continue;
        }
        g_ptr_array_add(parser->words, g_strdup(arg));
    }
    return TRUE;
}

static const CommandSpec *
find_command(GPtrArray *words, guint *ret_first_arg, GError **error)
{
    const char *word = words->len > 0 ? g_ptr_array_index(words, 0) : NULL;
    const char *sub = words->len > 1 ? g_ptr_array_index(words, 1) : NULL;

    if (!word) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "missing command; run 'carrel-guest help'");
        return NULL;
    }
    for (guint i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (!g_str_equal(commands[i].word, word))
            continue;
        if (!commands[i].sub) {
            *ret_first_arg = 1;
            return &commands[i];
        }
        if (sub && g_str_equal(commands[i].sub, sub)) {
            *ret_first_arg = 2;
            return &commands[i];
        }
    }
    if (g_str_equal(word, "proc"))
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "expected 'proc start|read|write|close|kill|list|resize'");
    else if (g_str_equal(word, "clipboard"))
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "expected 'clipboard get' or 'clipboard set'");
    else if (g_str_equal(word, "a11y"))
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "expected 'a11y tree', 'a11y node' or 'a11y action'");
    else if (g_str_equal(word, "fs"))
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "expected 'fs list', 'fs stat', 'fs mkdir', 'fs remove' or 'fs move'");
    else
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "unknown command '%s'; run 'carrel-guest help'", word);
    return NULL;
}

static gboolean
check_options(const Parser *parser, const CommandSpec *spec, GError **error)
{
    for (guint i = 0; i < G_N_ELEMENTS(option_specs); i++) {
        if ((parser->seen & option_specs[i].bit) && !(spec->allowed & option_specs[i].bit)) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                        "option '--%s' does not apply to '%s'", option_specs[i].name,
                        carrel_guest_command_to_string(spec->command));
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean
check_args(const CarrelGuestOptions *options, const CommandSpec *spec, guint n_args, GError **error)
{
    guint min_args = spec->min_args;
    guint max_args = spec->max_args;

    if (spec->command == CARREL_GUEST_COMMAND_CLIPBOARD_SET ||
        spec->command == CARREL_GUEST_COMMAND_TYPE)
        min_args = max_args = options->use_stdin ? 0 : 1;
    if (spec->command == CARREL_GUEST_COMMAND_PROC_START && options->pty)
        min_args = 0;
    /* --rows, --cols and --user describe the terminal's session: without --pty, a mistake. */
    if (spec->command == CARREL_GUEST_COMMAND_PROC_START && !options->pty &&
        (options->rows || options->cols || options->user)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "'--rows', '--cols' and '--user' of 'proc start' need '--pty'");
        return FALSE;
    }
    if (spec->command == CARREL_GUEST_COMMAND_SET_NET && n_args == 2) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "'set-net' takes 'ADDRESS/PREFIX GATEWAY DNS' or 'none'");
        return FALSE;
    }
    if (n_args < min_args || n_args > max_args) {
        const char *name = carrel_guest_command_to_string(spec->command);

        if (n_args > max_args && max_args == 0)
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                        "'%s' takes no arguments", name);
        else
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                        "'%s' takes %u to %u arguments, got %u", name, min_args, max_args, n_args);
        return FALSE;
    }
    return TRUE;
}

static gboolean
take_args(CarrelGuestOptions *options, GPtrArray *words, guint first, GError **error)
{
    g_autoptr(GStrvBuilder) builder = g_strv_builder_new();
    gsize total = 0;

    for (guint i = first; i < words->len; i++) {
        const char *word = g_ptr_array_index(words, i);

        total += strlen(word) + 1;
        g_strv_builder_add(builder, word);
    }
    if ((options->command == CARREL_GUEST_COMMAND_CLIPBOARD_SET ||
         options->command == CARREL_GUEST_COMMAND_TYPE) &&
        words->len > first) {
        const char *text = g_ptr_array_index(words, first);
        gboolean typed = options->command == CARREL_GUEST_COMMAND_TYPE;
        gsize max = typed ? CARREL_GUEST_LIMIT_TYPE_BYTES : CARREL_GUEST_LIMIT_CLIPBOARD_BYTES;

        if (strlen(text) > max) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT,
                        "%s text is larger than %" G_GSIZE_FORMAT " bytes",
                        typed ? "typed" : "clipboard", max);
            return FALSE;
        }
        options->text = g_strdup(text);
        return TRUE;
    }
    if (total > CARREL_GUEST_LIMIT_ARGS_BYTES) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT,
                    "arguments are longer than %d bytes", CARREL_GUEST_LIMIT_ARGS_BYTES);
        return FALSE;
    }
    options->argv = g_strv_builder_end(builder);
    return TRUE;
}

/* One dimension: 1-5 digits, no leading zero. */
static gboolean
parse_dimension(const char *text, gsize len, guint *ret_value)
{
    guint value = 0;

    if (len == 0 || len > 5 || text[0] == '0')
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isdigit(text[i]))
            return FALSE;
        value = value * 10 + (guint)(text[i] - '0');
    }
    *ret_value = value;
    return TRUE;
}

gboolean
carrel_guest_screen_parse(const char *text, guint *ret_width, guint *ret_height, GError **error)
{
    const char *x = strchr(text, 'x');
    guint width = 0, height = 0;

    if (!x || !parse_dimension(text, (gsize)(x - text), &width) ||
        !parse_dimension(x + 1, strlen(x + 1), &height) || width < CARREL_GUEST_SCREEN_MIN ||
        height < CARREL_GUEST_SCREEN_MIN || width > CARREL_GUEST_SCREEN_MAX ||
        height > CARREL_GUEST_SCREEN_MAX) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "screen size must be WIDTHxHEIGHT, each %d to %d", CARREL_GUEST_SCREEN_MIN,
                    CARREL_GUEST_SCREEN_MAX);
        return FALSE;
    }
    *ret_width = width;
    *ret_height = height;
    return TRUE;
}

static gint64
default_timeout(CarrelGuestCommand command)
{
    /* fs remove --recursive of a large tree takes a while; the watchdog must not cut it. */
    if (command == CARREL_GUEST_COMMAND_READY || command == CARREL_GUEST_COMMAND_FS_LIST ||
        command == CARREL_GUEST_COMMAND_FS_STAT || command == CARREL_GUEST_COMMAND_FS_MKDIR ||
        command == CARREL_GUEST_COMMAND_FS_REMOVE || command == CARREL_GUEST_COMMAND_FS_MOVE)
        return CARREL_GUEST_DEFAULT_READY_TIMEOUT_MS;
    if (command == CARREL_GUEST_COMMAND_TYPE)
        return CARREL_GUEST_DEFAULT_TYPE_TIMEOUT_MS;
    /* proc read answers at once unless asked to wait for output. */
    if (command == CARREL_GUEST_COMMAND_PROC_READ)
        return 0;
    if (command == CARREL_GUEST_COMMAND_SCREEN)
        return CARREL_GUEST_DEFAULT_SCREEN_TIMEOUT_MS;
    /* A large tree is thousands of D-Bus calls; the host waits 30 s in all. */
    if (command == CARREL_GUEST_COMMAND_A11Y_TREE || command == CARREL_GUEST_COMMAND_A11Y_NODE ||
        command == CARREL_GUEST_COMMAND_A11Y_ACTION)
        return CARREL_GUEST_DEFAULT_A11Y_TIMEOUT_MS;
    return CARREL_GUEST_DEFAULT_CLIPBOARD_TIMEOUT_MS;
}

CarrelGuestOptions *
carrel_guest_options_parse(int argc, char **argv, GError **error)
{
    g_autoptr(CarrelGuestOptions) options = g_new0(CarrelGuestOptions, 1);
    g_autoptr(GPtrArray) words = g_ptr_array_new_with_free_func(g_free);
    Parser parser = {.options = options, .words = words};
    const CommandSpec *spec;
    guint first = 0;

    options->timeout_ms = -1;
    options->depth = CARREL_GUEST_DEFAULT_A11Y_DEPTH;
    options->max_nodes = CARREL_GUEST_DEFAULT_A11Y_NODES;
    if (!split_words(&parser, argc, argv, error))
        return NULL;
    if (parser.help) {
        options->command = CARREL_GUEST_COMMAND_HELP;
        return g_steal_pointer(&options);
    }
    spec = find_command(words, &first, error);
    if (!spec)
        return NULL;
    options->command = spec->command;
    if (!check_options(&parser, spec, error) ||
        !check_args(options, spec, words->len - first, error) ||
        !take_args(options, words, first, error))
        return NULL;
    if (!options->display)
        options->display = g_strdup(CARREL_GUEST_DEFAULT_DISPLAY);
    if (options->timeout_ms < 0)
        options->timeout_ms = default_timeout(options->command);
    return g_steal_pointer(&options);
}
