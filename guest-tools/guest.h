/* carrel-guest: the helper run in a template's guest through the guest agent (as root, with no
 * session environment).  This header holds the parts that need no X connection: options, errors,
 * limits, JSON formatting and /proc parsing, so unit tests can use them without a display. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <sys/stat.h>
#include <sys/types.h>

G_BEGIN_DECLS

#define CARREL_GUEST_VERSION "0.1.0"

/* Limits on everything the guest (window titles, clipboard owners, /proc) or the caller controls.
 */
#define CARREL_GUEST_LIMIT_TITLE_CHARS 512
#define CARREL_GUEST_LIMIT_CLASS_CHARS 256
#define CARREL_GUEST_LIMIT_WINDOWS 256
#define CARREL_GUEST_LIMIT_CLIENT_LIST 4096
#define CARREL_GUEST_LIMIT_TREE_NODES 16384
#define CARREL_GUEST_LIMIT_TREE_DEPTH 4
#define CARREL_GUEST_LIMIT_CLIPBOARD_BYTES (1024 * 1024)
#define CARREL_GUEST_LIMIT_TIMEOUT_MS (3600 * 1000)
#define CARREL_GUEST_LIMIT_ARGS 256
#define CARREL_GUEST_LIMIT_ARGS_BYTES (256 * 1024)
#define CARREL_GUEST_LIMIT_PATH_LEN 4096
#define CARREL_GUEST_LIMIT_USER_LEN 32
#define CARREL_GUEST_LIMIT_DISPLAY_LEN 64
#define CARREL_GUEST_LIMIT_PROC_FILE (128 * 1024)
#define CARREL_GUEST_LIMIT_PROC_ENTRIES 65536
#define CARREL_GUEST_LIMIT_ENV_VALUE 4096
#define CARREL_GUEST_LIMIT_GROUPS 256
/* fs list: at most this many entries, and it stops once its JSON would pass the byte budget
 * (carreld reads at most 1 MiB of output); "truncated" says so. */
#define CARREL_GUEST_LIMIT_FS_ENTRIES 4096
#define CARREL_GUEST_LIMIT_FS_JSON_BYTES (768 * 1024)
#define CARREL_GUEST_LIMIT_TYPE_BYTES (64 * 1024)
/* a11y: levels below the root, elements per reply, characters of a name or role, actions and
 * states per element, and the D-Bus calls' own timeout. */
#define CARREL_GUEST_LIMIT_A11Y_DEPTH 64
#define CARREL_GUEST_LIMIT_A11Y_NODES 5000
#define CARREL_GUEST_LIMIT_A11Y_NAME_CHARS 512
#define CARREL_GUEST_LIMIT_A11Y_ROLE_CHARS 64
#define CARREL_GUEST_LIMIT_A11Y_CHILDREN 4096
#define CARREL_GUEST_LIMIT_A11Y_ID_LEN 512
#define CARREL_GUEST_LIMIT_A11Y_APP_BYTES 256
/* carreld reads at most 1 MiB of output: the tree stops short of that ("truncated"). */
#define CARREL_GUEST_LIMIT_A11Y_JSON_BYTES (768 * 1024)
#define CARREL_GUEST_DEFAULT_A11Y_DEPTH 12
#define CARREL_GUEST_DEFAULT_A11Y_TIMEOUT_MS 20000
#define CARREL_GUEST_DEFAULT_A11Y_NODES 500
/* proc start --pty and proc resize: rows and columns of the terminal. */
#define CARREL_GUEST_LIMIT_PTY_SIZE 1000

#define CARREL_GUEST_DEFAULT_DISPLAY ":0"
#define CARREL_GUEST_DEFAULT_READY_TIMEOUT_MS 60000
#define CARREL_GUEST_DEFAULT_CLIPBOARD_TIMEOUT_MS 5000
#define CARREL_GUEST_DEFAULT_TYPE_TIMEOUT_MS 60000
/* screen: how long it waits for the display to accept clients (a boot's X may be starting). */
#define CARREL_GUEST_DEFAULT_SCREEN_TIMEOUT_MS 20000
/* screen: sizes it accepts at all (carreld allows a narrower range, see its README). */
#define CARREL_GUEST_SCREEN_MIN 200
#define CARREL_GUEST_SCREEN_MAX 8192
/* The background clipboard server gives up its selection after this long. */
#define CARREL_GUEST_CLIPBOARD_SERVE_SECONDS 3600

#define CARREL_GUEST_ERROR (carrel_guest_error_quark())

/* Error codes; their wire names match the manager's where the meaning is the same. */
typedef enum {
    CARREL_GUEST_ERROR_FAILED,
    CARREL_GUEST_ERROR_INVALID_ARG,
    CARREL_GUEST_ERROR_NOT_FOUND,
    CARREL_GUEST_ERROR_FORBIDDEN,
    CARREL_GUEST_ERROR_LIMIT,
    CARREL_GUEST_ERROR_TIMEOUT,
    CARREL_GUEST_ERROR_DISPLAY,
    CARREL_GUEST_ERROR_X11,
    CARREL_GUEST_ERROR_LAUNCH,
    CARREL_GUEST_ERROR_INTERNAL,
    CARREL_GUEST_ERROR_EXISTS,
    CARREL_GUEST_ERROR_NOT_EMPTY,
    CARREL_GUEST_ERROR_WRONG_STATE,
    CARREL_GUEST_ERROR_LAST
} CarrelGuestErrorCode;

GQuark carrel_guest_error_quark(void);

/* Wire name of a code ("not_found"); "failed" for out-of-range values. */
const char *carrel_guest_error_code_to_string(CarrelGuestErrorCode code);

/* Parses a wire name back; CARREL_GUEST_ERROR_FAILED for unknown names. */
CarrelGuestErrorCode carrel_guest_error_code_from_string(const char *name);

/* Process exit status for an error: 2 for usage errors, 1 otherwise. */
int carrel_guest_error_exit_status(const GError *error);

typedef enum {
    CARREL_GUEST_COMMAND_READY,
    CARREL_GUEST_COMMAND_WINDOWS,
    CARREL_GUEST_COMMAND_CLIPBOARD_GET,
    CARREL_GUEST_COMMAND_CLIPBOARD_SET,
    CARREL_GUEST_COMMAND_TYPE,
    CARREL_GUEST_COMMAND_LAUNCH,
    CARREL_GUEST_COMMAND_OPEN,
    CARREL_GUEST_COMMAND_SET_MAC,
    CARREL_GUEST_COMMAND_SET_NET,
    CARREL_GUEST_COMMAND_SCREEN,
    CARREL_GUEST_COMMAND_FS_LIST,
    CARREL_GUEST_COMMAND_FS_STAT,
    CARREL_GUEST_COMMAND_FS_MKDIR,
    CARREL_GUEST_COMMAND_FS_REMOVE,
    CARREL_GUEST_COMMAND_FS_MOVE,
    CARREL_GUEST_COMMAND_PROC_START,
    CARREL_GUEST_COMMAND_PROC_READ,
    CARREL_GUEST_COMMAND_PROC_WRITE,
    CARREL_GUEST_COMMAND_PROC_CLOSE,
    CARREL_GUEST_COMMAND_PROC_KILL,
    CARREL_GUEST_COMMAND_PROC_LIST,
    CARREL_GUEST_COMMAND_A11Y_TREE,
    CARREL_GUEST_COMMAND_A11Y_NODE,
    CARREL_GUEST_COMMAND_A11Y_ACTION,
    CARREL_GUEST_COMMAND_PROC_RESIZE,
    CARREL_GUEST_COMMAND_VERSION,
    CARREL_GUEST_COMMAND_HELP,
    CARREL_GUEST_COMMAND_LAST
} CarrelGuestCommand;

/* Name of a command as typed ("clipboard get"); "unknown" for out-of-range values. */
const char *carrel_guest_command_to_string(CarrelGuestCommand command);

typedef struct {
    CarrelGuestCommand command;
    char *display;     /* never NULL after parsing */
    char *xauthority;  /* NULL: find the session's */
    char *user;        /* launch/open: NULL finds the desktop user */
    gint64 timeout_ms; /* the command's default when not given */
    gboolean use_stdin;
    gboolean parents;   /* fs mkdir --parents */
    gboolean recursive; /* fs remove --recursive */
    gboolean a11y_all;  /* a11y tree --window all */
    guint depth;        /* a11y tree --depth */
    guint max_nodes;    /* a11y tree --max-nodes */
    char *a11y_app;     /* a11y tree --app NAME: that application only (implies all) */
    gboolean pty;       /* proc start --pty: on a pseudo-terminal */
    guint rows, cols;   /* proc start --pty: its size (0: 24 x 80) */
    char *text;         /* clipboard set TEXT, type TEXT */
    GStrv argv;         /* launch: program and arguments; open: the one target; set-mac: the MAC;
                         * set-net: ADDRESS/PREFIX GATEWAY DNS, or none */
} CarrelGuestOptions;

void carrel_guest_options_free(CarrelGuestOptions *options);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelGuestOptions, carrel_guest_options_free)

/* Parses the command line (argv[0] is the program).  Options may come before or after the
 * command words; everything after "--", and after launch's program name, is positional. */
CarrelGuestOptions *carrel_guest_options_parse(int argc, char **argv, GError **error);

/* A terminal's rows or columns: 1 to CARREL_GUEST_LIMIT_PTY_SIZE (INVALID_ARG otherwise). */
gboolean carrel_guest_pty_size_parse(const char *value, guint *ret_size, GError **error);

/* The usage text printed by "help". */
const char *carrel_guest_usage(void);

/* Display number of a display name (":0", ":1.0", "unix:2", "host:3.1"); FALSE if malformed. */
gboolean carrel_guest_display_number(const char *display, int *ret_number);

/* A copy of text cut to at most max_chars characters, invalid UTF-8 replaced; NULL gives "". */
char *carrel_guest_text_clip(const char *text, gssize len, gsize max_chars);

/* Latin-1 (ISO 8859-1, the ICCCM STRING type) to UTF-8; never fails. */
char *carrel_guest_text_from_latin1(const char *text, gsize len);

/* Valid UTF-8 to Latin-1, characters beyond U+00FF as '?'; the length goes to ret_len. */
char *carrel_guest_text_to_latin1(const char *utf8, gsize *ret_len);

/* Cuts len so that text[0..len) does not end inside a UTF-8 character; returns the new length. */
gsize carrel_guest_text_utf8_boundary(const char *text, gsize len, gsize max_bytes);

/* Reads standard input to its end, at most max bytes (LIMIT beyond); what is read is the
 * caller's to check. */
char *carrel_guest_read_stdin(gsize max, gsize *ret_len, GError **error);

/* type (guest-type.c): text is valid UTF-8 without NUL or control characters other than newline
 * and tab, at most CARREL_GUEST_LIMIT_TYPE_BYTES; INVALID_ARG naming the first offending
 * character (1-based) otherwise. */
gboolean carrel_guest_type_check(const char *text, gsize len, GError **error);

/* The X keysym that types character c: Return and Tab for newline and tab, the Latin-1 keysym
 * (the code point) for U+0020..U+007E and U+00A0..U+00FF, 0x01000000 + c for the rest of
 * Unicode; 0 (NoSymbol) for control characters and values beyond U+10FFFF. */
gulong carrel_guest_type_keysym(gunichar c);

/* TRUE if target looks like a URL ("scheme:..."), not a file path. */
gboolean carrel_guest_is_url(const char *target);

/* One application window, as "windows" reports it. */
typedef struct {
    gulong id;
    char *title;
    char *wm_class;
    char *instance;
    gint64 pid; /* -1: unknown */
    int x, y, width, height;
    gboolean focused;
    gboolean visible;
} CarrelGuestWindow;

CarrelGuestWindow *carrel_guest_window_new(gulong id);
void carrel_guest_window_free(CarrelGuestWindow *window);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelGuestWindow, carrel_guest_window_free)

/* {"windows":[...],"truncated":bool}; windows holds CarrelGuestWindow, bottom to top. */
JsonNode *carrel_guest_windows_to_json(GPtrArray *windows, gboolean truncated);

/* {"error":{"code":"...","message":"..."}} */
JsonNode *carrel_guest_error_to_json(const GError *error);

/* One line of compact JSON with a trailing newline. */
char *carrel_guest_json_to_string(JsonNode *node);

/* Writes the node as one line on stdout; FALSE if stdout fails. */
gboolean carrel_guest_json_print(JsonNode *node);

/* A builder already inside its top-level object; finish with carrel_guest_json_end(). */
JsonBuilder *carrel_guest_json_begin(void);
JsonNode *carrel_guest_json_end(JsonBuilder *builder);

/* /proc parsing, pure over a file's bytes (NUL-separated lists). */

/* Value of key in an environ block, or NULL; values longer than the limit are ignored. */
char *carrel_guest_environ_lookup(const char *block, gsize len, const char *key);

/* Splits a NUL-separated block (cmdline) into at most max_items strings. */
GStrv carrel_guest_split_nul(const char *block, gsize len, guint max_items);

/* If argv is an X server's (Xorg, Xvfb, ...) serving display number, its "-auth" file, else NULL.
 */
char *carrel_guest_server_auth_from_argv(const char *const *argv, int number);

/* Reads at most max bytes of a file (for /proc files, whose size stat cannot tell). */
gboolean carrel_guest_read_bounded(const char *path, gsize max, char **ret_data, gsize *ret_len,
                                   GError **error);

/* A desktop session's process: the user that runs it and the parts of its environment that a
 * launched program should inherit. */
typedef struct {
    uid_t uid;
    pid_t pid;
    char *xauthority; /* may be NULL */
    GStrv env;        /* "KEY=VALUE" for the inherited keys only */
} CarrelGuestSession;

void carrel_guest_session_free(CarrelGuestSession *session);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelGuestSession, carrel_guest_session_free)

/* The oldest non-root process whose DISPLAY is display number `number` (regular users, uid
 * 1000..59999, first); NULL if none. */
CarrelGuestSession *carrel_guest_proc_find_session(int number);

/* The "-auth" file of the X server that serves display number `number`, or NULL. */
char *carrel_guest_proc_find_server_auth(int number);

/* Name of a known window manager process running on display number `number`, or NULL. */
char *carrel_guest_proc_find_wm(int number);

/* Commands: each returns the JSON to print, or NULL with error set. */
JsonNode *carrel_guest_cmd_ready(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_windows(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_clipboard_get(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_clipboard_set(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_type(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_launch(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_open(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_set_mac(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_set_net(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_screen(const CarrelGuestOptions *options, GError **error);

/* screen (guest-screen.c, guest-args.c). */

/* Parses "WIDTHxHEIGHT" (decimal, no sign or leading zero), each within CARREL_GUEST_SCREEN_MIN
 * and CARREL_GUEST_SCREEN_MAX; INVALID_ARG otherwise. */
gboolean carrel_guest_screen_parse(const char *text, guint *ret_width, guint *ret_height,
                                   GError **error);

/* A video mode's timings, as XRandR's mode info takes them (clock in Hz). */
typedef struct {
    guint width, height;
    gulong clock_hz;
    guint hsync_start, hsync_end, htotal;
    guint vsync_start, vsync_end, vtotal;
} CarrelGuestTiming;

/* The VESA CVT reduced-blanking timing of width x height at 60 Hz (what "cvt -r" prints): a
 * mode a virtual output accepts for any size. Pure. */
void carrel_guest_cvt_rb(guint width, guint height, CarrelGuestTiming *ret_timing);
JsonNode *carrel_guest_cmd_fs(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_a11y(const CarrelGuestOptions *options, GError **error);

/* fs (guest-fs.c). */

/* One entry as fs list/stat print it: {"name"|"name_b64", "type", "size", "mode", "mtime",
 * "target"|"target_b64" (symlinks)}. Names that are not UTF-8 go as base64 of their bytes. */
JsonNode *carrel_guest_fs_entry_to_json(const char *name, const struct stat *st,
                                        const char *target);
JsonNode *carrel_guest_cmd_proc_start(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_proc_read(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_proc_write(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_proc_close(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_proc_kill(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_proc_list(const CarrelGuestOptions *options, GError **error);
JsonNode *carrel_guest_cmd_proc_resize(const CarrelGuestOptions *options, GError **error);

/* set-mac (guest-net.c). */

/* Parses "xx:xx:xx:xx:xx:xx" (either case) into ret_mac; refuses multicast and all-zero. */
gboolean carrel_guest_mac_parse(const char *text, guint8 ret_mac[6], GError **error);

/* A network interface as /sys/class/net shows it. */
typedef struct {
    char *name;
    int type;            /* ARPHRD_*: 1 is Ethernet */
    gboolean has_device; /* backed by a device (PCI, virtio), not a virtual interface */
} CarrelGuestNic;

void carrel_guest_nic_free(CarrelGuestNic *nic);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelGuestNic, carrel_guest_nic_free)

/* The name of the one Ethernet interface with a device among nics (of CarrelGuestNic);
 * NOT_FOUND when there is none, INVALID_ARG when there are several. */
const char *carrel_guest_pick_nic(GPtrArray *nics, GError **error);

/* The name of this guest's one NIC: carrel_guest_pick_nic over /sys/class/net. */
char *carrel_guest_find_nic(GError **error);

/* set-net: guest-net-config.c decides (pure), guest-net-set.c applies. */

/* What set-net should leave on the NIC; addresses in host byte order. */
typedef struct {
    gboolean none;   /* "set-net none": no address, no default route, no name server */
    guint32 address; /* a host of address/prefix: not its network or broadcast address */
    guint prefix;    /* 8 to 30 */
    guint32 gateway; /* another host of the same subnet */
    guint32 dns;     /* any unicast address */
} CarrelGuestNetConfig;

/* Parses exactly four dotted decimal octets ("10.77.0.5"); nothing else inet_aton would take. */
gboolean carrel_guest_ipv4_parse(const char *text, guint32 *ret_address, GError **error);

/* "a.b.c.d" of an address in host byte order. */
char *carrel_guest_ipv4_to_string(guint32 address);

/* The netmask of a prefix length (0 to 32), in host byte order. */
guint32 carrel_guest_ipv4_netmask(guint prefix);

/* Checks set-net's arguments: {"none"} or {"ADDRESS/PREFIX", "GATEWAY", "DNS"}; INVALID_ARG with
 * the offending value otherwise. */
gboolean carrel_guest_net_config_parse(const char *const *argv, CarrelGuestNetConfig *ret_config,
                                       GError **error);

/* TRUE if table (/proc/net/route) has exactly one default route, and it goes via gateway on nic
 * with metric 0: what set-net leaves. */
gboolean carrel_guest_net_default_route_is(const char *table, const char *nic, guint32 gateway);

/* The whole of /etc/resolv.conf for config: "nameserver DNS\n", or "" for none. */
char *carrel_guest_net_resolv_conf(const CarrelGuestNetConfig *config);

/* {"nic":"eth0","address":"10.77.0.5/16","gateway":"10.77.0.1","dns":"10.77.0.1"}; the last three
 * are null for none. */
JsonNode *carrel_guest_net_config_to_json(const char *nic, const CarrelGuestNetConfig *config);

/* Replaces path (/etc/resolv.conf) with config's resolv.conf atomically: a temporary file in the
 * same folder, then rename. A symlink at path is replaced, not followed. */
gboolean carrel_guest_net_write_resolv_conf(const char *path, const CarrelGuestNetConfig *config,
                                            GError **error);

/* a11y (guest-a11y-tree.c: pure, over any source of elements; guest-a11y.c: AT-SPI over D-Bus).
 * An element's id is the path of child indexes from the desktop ("2.0.3": the third
 * application's first child's fourth child), so a later call finds it again. */

/* What the tree shows of one element. */
typedef struct {
    char *role;     /* "push button" */
    char *name;     /* may be "" */
    guint64 states; /* bit n: AT-SPI state n (see carrel_guest_a11y_state_name) */
    gboolean has_bounds;
    int x, y, width, height; /* screen pixels */
    char *action;            /* the default action's name, NULL when none */
} CarrelGuestA11yInfo;

void carrel_guest_a11y_info_clear(CarrelGuestA11yInfo *info);

/* A source of elements: opaque element handles, their children and what they show. */
typedef struct {
    /* The children of element (NULL: the desktop) as new handles, at most max; the array frees
     * them (element_free as its free function). */
    GPtrArray *(*children)(gpointer source, gconstpointer element, guint max, GError **error);
    gboolean (*describe)(gpointer source, gconstpointer element, CarrelGuestA11yInfo *ret_info,
                         GError **error);
    GDestroyNotify element_free;
} CarrelGuestA11yOps;

/* AT-SPI's name of state bit n ("focused", "is-default"); NULL beyond the known ones. */
const char *carrel_guest_a11y_state_name(guint n);

/* Parses an element id ("2.0.3") into child indexes; INVALID_ARG when malformed. */
GArray *carrel_guest_a11y_id_parse(const char *id, GError **error);

/* The element at id, a new handle (NOT_FOUND when an index is past the children). */
gpointer carrel_guest_a11y_resolve(const CarrelGuestA11yOps *ops, gpointer source, const char *id,
                                   GError **error);

/* The id of the focused window: the first top-level element (a child of an application) with
 * state active, else NULL. */
char *carrel_guest_a11y_find_active(const CarrelGuestA11yOps *ops, gpointer source, GError **error);

/* {"root": NODE|null, "scope": "focused"|"desktop", "count": N, "truncated": bool}: the tree
 * under root_id (NULL: the desktop, whose node has role "desktop frame"), depth levels below
 * it, at most max_nodes elements breadth-first, documents' insides first and those of menus,
 * toolbars and tab lists last (so a web page is reached before the budget goes). NODE: {"id",
 * "role", "name", "states": [...], "bounds": {"x","y","width","height"}|null, "action": NAME|null,
 * "children": [...]}. */
JsonNode *carrel_guest_a11y_tree(const CarrelGuestA11yOps *ops, gpointer source,
                                 const char *root_id, guint depth, guint max_nodes, GError **error);

/* The same tree of the desktop, with only the applications whose name is app (whole name, case
 * not minding) below the root: their ids are those of the whole desktop's tree. */
JsonNode *carrel_guest_a11y_tree_app(const CarrelGuestA11yOps *ops, gpointer source,
                                     const char *app, guint depth, guint max_nodes, GError **error);

/* One element's NODE without "children". */
JsonNode *carrel_guest_a11y_node_to_json(const char *id, const CarrelGuestA11yInfo *info);

G_END_DECLS
