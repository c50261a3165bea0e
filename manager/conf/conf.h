/* conf: definitions of templates and sessions; parse, validate and format (json-glib, no I/O). */
#pragma once

#include <json-glib/json-glib.h>

#include "util/util.h"

G_BEGIN_DECLS

typedef enum {
    CARREL_BOOT_DIRECT, /* kernel + initrd + cmdline given to QEMU, disk has no bootloader */
    CARREL_BOOT_BIOS,
    CARREL_BOOT_UEFI,
    CARREL_BOOT_LAST
} CarrelBoot;

const char *carrel_boot_to_string(CarrelBoot boot);
/* Returns CARREL_BOOT_LAST for unknown names. */
CarrelBoot carrel_boot_from_string(const char *name);

typedef enum {
    CARREL_SESSION_CREATING,
    CARREL_SESSION_RUNNING,
    CARREL_SESSION_PAUSED,
    CARREL_SESSION_HIBERNATED,
    CARREL_SESSION_STOPPED,
    CARREL_SESSION_CRASHED,
    CARREL_SESSION_DESTROYED,
    CARREL_SESSION_LAST
} CarrelSessionState;

const char *carrel_session_state_to_string(CarrelSessionState state);
/* Returns CARREL_SESSION_LAST for unknown names. */
CarrelSessionState carrel_session_state_from_string(const char *name);

/* The verbs that move a session; used by the state machine below. */
typedef enum {
    CARREL_SESSION_OP_START,
    CARREL_SESSION_OP_STOP,
    CARREL_SESSION_OP_PAUSE,
    CARREL_SESSION_OP_RESUME,
    CARREL_SESSION_OP_HIBERNATE,
    CARREL_SESSION_OP_DESTROY,
    CARREL_SESSION_OP_LAST
} CarrelSessionOp;

const char *carrel_session_op_to_string(CarrelSessionOp op);

/*
 * The session state machine: TRUE when op is allowed from state, with *ret_next the state it
 * leads to. Otherwise a CARREL_ERROR_WRONG_STATE error naming the current state.
 */
gboolean carrel_session_transition(CarrelSessionState state, CarrelSessionOp op,
                                   CarrelSessionState *ret_next, GError **error);

/* A template version as stored. Plain record (like libvirt's virDomainDef). */
typedef struct {
    char *name;
    guint version;
    char *sha256; /* of the disk file */
    char *format; /* "qcow2" or "raw" */
    guint64 size_bytes;
    guint64 virtual_size_bytes;
    CarrelBoot boot;
    char *dir; /* templates/<name>/<version> */
    char *disk_path;
    char *kernel_path; /* NULL unless boot == DIRECT */
    char *initrd_path;
    char *cmdline;
    char *recipe_hash; /* NULL for imported disks */
    /* The recipe's "defaults" (0 = none: carreld's own defaults, the image's own screen). */
    guint default_vcpus;
    guint default_memory_mib;
    guint default_screen_width;
    guint default_screen_height;
    gint64 created_at;
} CarrelTemplate;

CarrelTemplate *carrel_template_new(void);
void carrel_template_free(CarrelTemplate *tmpl);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelTemplate, carrel_template_free)

/* JSON object of a template for the API; sessions_using is reported as "sessions". */
JsonNode *carrel_template_to_json(const CarrelTemplate *tmpl, guint sessions_using);

/*
 * Splits a template reference, "NAME" or "NAME@VERSION", the one way the API, session requests
 * and the CLI read it: NAME a valid name (carrel_util_is_valid_name), VERSION a decimal number of
 * at least 1; *ret_version is 0 (the latest) without one. INVALID_ARG otherwise ("a@b@3", "a@",
 * "@3", "a@0"), with the same message wherever the reference came from.
 */
gboolean carrel_template_ref_parse(const char *text, char **ret_name, guint *ret_version,
                                   GError **error);

/* A request to import a disk file as a new template version (host paths). */
typedef struct {
    char *name;
    char *disk;
    char *format; /* required: never probed */
    CarrelBoot boot;
    char *kernel;
    char *initrd;
    char *cmdline;
    CarrelTemplate *defaults; /* a built recipe's defaults (default_* members only), or NULL */
} CarrelTemplateImport;

void carrel_template_import_free(CarrelTemplateImport *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelTemplateImport, carrel_template_import_free)

/*
 * Parses and validates {name, disk, format, boot?|firmware?, kernel?, initrd?, cmdline?}.
 * boot defaults to "direct" when kernel is given, else "bios".
 */
CarrelTemplateImport *carrel_template_import_from_json(JsonNode *node, GError **error);

/*
 * A template version's warm state: the memory of its booted desktop, saved to a file, and the
 * frozen disk layer that memory belongs to. Sessions restore it instead of booting.
 */
typedef struct {
    char *template_name;
    guint template_version;
    char *memory_path; /* libvirt save image, root-only */
    char *disk_path;   /* frozen qcow2 layer on the template disk */
    guint vcpus;       /* the machine shape the memory was saved with */
    guint memory_mib;
    guint64 memory_bytes;
    guint machine_revision; /* of the machine saved (CARREL_HYPERVISOR_MACHINE_REVISION) */
    gint64 created_at;
    char *memory_file; /* guest RAM, when not in the save image (memory.ram beside it), or NULL */
} CarrelWarmState;

CarrelWarmState *carrel_warm_state_new(void);
void carrel_warm_state_free(CarrelWarmState *warm);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelWarmState, carrel_warm_state_free)

/* JSON object of a warm state: {vcpus, memory_mib, memory_bytes, created_at}. */
JsonNode *carrel_warm_state_to_json(const CarrelWarmState *warm);

/* A session as stored. */
typedef struct {
    char *id;   /* "s-" + 12 hex */
    char *name; /* unique among sessions that are not destroyed */
    char *template_name;
    guint template_version;
    CarrelSessionState state;
    char *state_reason; /* why it is crashed/failed, or NULL */
    guint vcpus;
    guint memory_mib;
    char *dir;            /* sessions/<id> */
    char *overlay_path;   /* sessions/<id>/disk.qcow2 */
    gboolean from_warm;   /* restored from the template's warm state rather than booted */
    GStrv exit_paths;     /* collected as artifacts when the session stops, crashes or goes */
    char *head_snapshot;  /* the snapshot its disk and memory descend from, or NULL */
    char *origin_session; /* a fork: the session whose snapshot it was restored from */
    gint64 expires_at;    /* unix seconds when its time limit acts, 0 = none */
    guint idle_timeout_s; /* no activity for this long acts, 0 = none */
    char *expiry_action;  /* "destroy", "stop", "hibernate" or "pause" */
    char *mac;            /* of its NIC (see carrel_net_new_mac); NULL: made before NICs */
    char *pool;           /* a warm pool member (its template's name) until taken, else NULL */
    gboolean from_pool;   /* it was taken from a warm pool */
    char *owner_id;       /* token id of the principal that created (or forked, took) it;
                             NULL for sessions older than owners: admins and reviewers only */
    char *owner_label;    /* that principal's name */
    char *policy;         /* the named policy it was created under ("default") */
    char *egress_ip;      /* its address on the egress network, or NULL (no network) */
    guint screen_width;   /* set in the guest after every boot and restore; 0 = the image's own */
    guint screen_height;
    char *memory_file; /* the warm state's RAM file its memory maps (privately), or NULL */
    gint64 created_at;
    gint64 updated_at;
    JsonNode *timings; /* the verb that returned it: where its time went (not stored), or NULL */
} CarrelSession;

CarrelSession *carrel_session_new(void);
void carrel_session_free(CarrelSession *session);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSession, carrel_session_free)

/* Libvirt domain name of a session: "carrel-<id>". */
char *carrel_session_domain_name(const char *session_id);

/* JSON object of a session for the API. */
JsonNode *carrel_session_to_json(const CarrelSession *session);

/*
 * A task input written into a new session's disk before it boots (or copied in through the
 * agent after a warm restore). Exactly one source: content (from content_base64, a file of
 * mode), upload (a tar from POST /v1/uploads, unpacked into path), or host_path (a file or
 * folder on the daemon's host: admin tokens only).
 */
typedef struct {
    char *path; /* absolute guest path */
    GBytes *content;
    char *upload;    /* "u-..." */
    char *host_path; /* absolute */
    guint32 mode;    /* for content; default 0644 */
} CarrelInput;

void carrel_input_free(CarrelInput *input);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelInput, carrel_input_free)

/* A request to create a session: {template, name?, policy?, vcpus?, memory_mib?, screen?, cold?,
 * artifacts?, inputs?, ttl_s?, idle_timeout_s?, on_expiry?}. */
typedef struct {
    char *template_name;
    guint template_version; /* 0 = latest */
    char *name;             /* NULL = derived from the id */
    char *policy;           /* a named policy; NULL = "default" (or the token's only one) */
    guint vcpus;            /* 0 = default */
    guint memory_mib;       /* 0 = default */
    guint screen_width;     /* "screen": "WxH"; 0 = the template's default */
    guint screen_height;
    gboolean cold;        /* boot even when the template is warm */
    GStrv exit_paths;     /* "artifacts": collected when the session ends */
    GPtrArray *inputs;    /* CarrelInput, or NULL */
    guint ttl_s;          /* time limit from creation, 0 = the policy's */
    guint idle_timeout_s; /* 0 = the policy's */
    char *expiry_action;  /* NULL = the policy's ("destroy" by default) */
} CarrelSessionRequest;

void carrel_session_request_free(CarrelSessionRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSessionRequest, carrel_session_request_free)

/*
 * Parses and validates a create request. "template" may be "name" or "name@version".
 * Unknown members are refused (a typo must not be silently ignored).
 */
CarrelSessionRequest *carrel_session_request_from_json(JsonNode *node, GError **error);

/* A command to run in a guest: {argv, env?, cwd?, stdin?, timeout_s?, stream?, background?}. */
typedef struct {
    GStrv argv;
    GStrv env; /* "NAME=VALUE" entries, names checked */
    char *cwd; /* absolute, or NULL */
    GBytes *stdin_bytes;
    guint timeout_s;
    gboolean stream;     /* output as it comes (server-sent events), not at the end */
    gboolean background; /* start it, answer its handle, never wait */
} CarrelExecRequest;

void carrel_exec_request_free(CarrelExecRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelExecRequest, carrel_exec_request_free)

#define CARREL_EXEC_DEFAULT_TIMEOUT_S 60
#define CARREL_EXEC_MAX_TIMEOUT_S 3600
#define CARREL_EXEC_MAX_ARGS 256
#define CARREL_EXEC_MAX_ARGV_BYTES (64 * 1024)
#define CARREL_EXEC_MAX_STDIN (1024 * 1024)

/* Parses and bounds an exec request; the program runs as given (no shell is added). */
CarrelExecRequest *carrel_exec_request_from_json(JsonNode *node, GError **error);

/* What a command did: output is guest text, made valid UTF-8 for JSON. */
typedef struct {
    int exit_code;
    GBytes *stdout_bytes;
    GBytes *stderr_bytes;
    gboolean truncated;
    gboolean timed_out;
    gint64 duration_ms;
} CarrelExecResult;

void carrel_exec_result_clear(CarrelExecResult *result);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CarrelExecResult, carrel_exec_result_clear)
JsonNode *carrel_exec_result_to_json(const CarrelExecResult *result);

/*
 * Keys (conf-keymap.c). Every key is normalised to a QKeyCode name of QEMU 7.2 (qapi/ui.json),
 * the names input-send-event takes ("a", "shift", "ret", "kp_enter", "meta_l"...). Characters are
 * mapped through the US keyboard layout: the guest must use that layout for typed text and
 * character keys to come out as asked.
 */
#define CARREL_KEYMAP_MAX_COMBO_KEYS 8
#define CARREL_KEYMAP_MAX_NAME 32

/* TRUE when name is a QKeyCode of QEMU 7.2 ("unmapped" excluded). */
gboolean carrel_keymap_is_qcode(const char *name);

/*
 * The key of one character of typed text: printable US-layout ASCII (0x20..0x7e) with
 * *ret_shift telling whether shift must be held ('A', '!', '{'...), '\n' (ret) and '\t' (tab).
 * FALSE for anything else, outputs untouched.
 */
gboolean carrel_keymap_from_char(char c, const char **ret_qcode, gboolean *ret_shift);

/*
 * Checks that text can be typed key by key (carrel_keymap_from_char accepts every byte).
 * Otherwise INVALID_ARG naming the first offending character and its position (1-based, in
 * characters). Other text cannot be typed through a keyboard with a fixed layout: it is for the
 * type methods that use the guest (see CarrelTypeMethod).
 */
gboolean carrel_keymap_check_text(const char *text, GError **error);

/*
 * One key by name, as xdotool (X keysym names: "Return", "Page_Up", "KP_Enter", "super",
 * "BackSpace"), OpenAI ("ENTER", "ARROWLEFT", "CMD") or pyautogui/OSWorld ("enter", "ctrlleft",
 * "win", "pageup", "volumeup") spell it, or its QKeyCode name; multi-character names are
 * case-insensitive. A single character is a key of the US layout; an upper-case letter or a
 * shifted symbol sets *ret_shift ("A" = shift+a, "!" = shift+1), unless caseless_letters is set
 * (OpenAI: "T" is the t key). INVALID_ARG "unknown key 'NAME'" otherwise.
 */
gboolean carrel_keymap_lookup(const char *name, gboolean caseless_letters, const char **ret_qcode,
                              gboolean *ret_shift, GError **error);

/*
 * Keys pressed together, from names (see carrel_keymap_lookup), as QKeyCode names in press order:
 * "shift" is added before a key that needs it, duplicates are dropped. At most
 * CARREL_KEYMAP_MAX_COMBO_KEYS keys, at least one. INVALID_ARG otherwise.
 */
GStrv carrel_keymap_resolve_keys(const char *const *names, gboolean caseless_letters,
                                 GError **error);

/*
 * One xdotool-style combination "ctrl+shift+t" (no whitespace; "+" alone or after a separator
 * is the plus key: "ctrl++"), resolved like carrel_keymap_resolve_keys.
 */
GStrv carrel_keymap_parse_combo(const char *combo, GError **error);

/*
 * A sequence of combinations separated by whitespace, as xdotool's key command takes it
 * ("ctrl+a BackSpace"): a GPtrArray of GStrv (see carrel_keymap_parse_combo), 1..max_combos.
 */
GPtrArray *carrel_keymap_parse_combos(const char *text, guint max_combos, GError **error);

/*
 * Computer actions (conf-action.c): what POST /v1/sessions/{id}/computer takes, in carrel's own
 * names or in the formats of Anthropic's computer tool, OpenAI's computer-use actions and
 * OSWorld's computer_13, all normalised to one CarrelAction.
 */
typedef enum {
    CARREL_ACTION_SCREENSHOT,
    CARREL_ACTION_ZOOM,
    CARREL_ACTION_CURSOR_POSITION,
    CARREL_ACTION_SCREEN_SIZE,
    CARREL_ACTION_MOUSE_MOVE,
    CARREL_ACTION_CLICK,
    CARREL_ACTION_MOUSE_DOWN,
    CARREL_ACTION_MOUSE_UP,
    CARREL_ACTION_DRAG,
    CARREL_ACTION_SCROLL,
    CARREL_ACTION_TYPE,
    CARREL_ACTION_KEY,
    CARREL_ACTION_KEY_DOWN,
    CARREL_ACTION_KEY_UP,
    CARREL_ACTION_HOLD_KEY,
    CARREL_ACTION_WAIT,
    CARREL_ACTION_CLIPBOARD_GET, /* desktop helpers, run through carrel-guest */
    CARREL_ACTION_CLIPBOARD_SET,
    CARREL_ACTION_WINDOWS,
    CARREL_ACTION_LAUNCH,
    CARREL_ACTION_OPEN,
    CARREL_ACTION_CLICK_ELEMENT, /* an element of the accessibility tree, by its id */
    CARREL_ACTION_FAIL, /* OSWorld's verdicts: the agent gives up / says the task is done */
    CARREL_ACTION_DONE,
    CARREL_ACTION_LAST
} CarrelActionKind;

const char *carrel_action_kind_to_string(CarrelActionKind kind);
/* Returns CARREL_ACTION_LAST for unknown names (carrel's names only, no aliases). */
CarrelActionKind carrel_action_kind_from_string(const char *name);

/* TRUE for the kinds that send keyboard or pointer events (and wait, which only pauses). */
gboolean carrel_action_kind_sends_hid(CarrelActionKind kind);

typedef enum {
    CARREL_BUTTON_LEFT,
    CARREL_BUTTON_MIDDLE,
    CARREL_BUTTON_RIGHT,
    CARREL_BUTTON_BACK,    /* QEMU "side" */
    CARREL_BUTTON_FORWARD, /* QEMU "extra" */
    CARREL_BUTTON_LAST
} CarrelButton;

const char *carrel_button_to_string(CarrelButton button);
/* Returns CARREL_BUTTON_LAST for unknown names. */
CarrelButton carrel_button_from_string(const char *name);

/* What the response of a batch carries: a screenshot after the last action, after each, none. */
typedef enum {
    CARREL_OBSERVE_FINAL,
    CARREL_OBSERVE_EACH,
    CARREL_OBSERVE_NONE,
    CARREL_OBSERVE_LAST
} CarrelObserve;

const char *carrel_observe_to_string(CarrelObserve observe);
/* Returns CARREL_OBSERVE_LAST for unknown names. */
CarrelObserve carrel_observe_from_string(const char *name);

/*
 * How a type action reaches the guest. keys: QEMU key presses through the hypervisor (US layout,
 * no guest help); guest_keysyms: carrel-guest types each character as its X keysym through XTest
 * (any Unicode text); clipboard: carrel-guest sets CLIPBOARD and PRIMARY, then the paste keys are
 * pressed (shift+Insert unless paste_keys says otherwise). AUTO is only ever asked, never chosen.
 */
typedef enum {
    CARREL_TYPE_METHOD_AUTO,
    CARREL_TYPE_METHOD_KEYS,
    CARREL_TYPE_METHOD_GUEST_KEYSYMS,
    CARREL_TYPE_METHOD_CLIPBOARD,
    CARREL_TYPE_METHOD_LAST
} CarrelTypeMethod;

const char *carrel_type_method_to_string(CarrelTypeMethod method);
/* Returns CARREL_TYPE_METHOD_LAST for unknown names. */
CarrelTypeMethod carrel_type_method_from_string(const char *name);

/*
 * Checks text for a type action: valid UTF-8 without control characters (C0, DEL, C1) other
 * than newline and tab; INVALID_ARG naming the first offending character and its position
 * (1-based, in characters). The length bound is the caller's (CARREL_ACTION_MAX_TEXT).
 */
gboolean carrel_action_check_typed_text(const char *text, GError **error);

/*
 * AUTO types at most this many characters as key presses. The guest's kernel keeps 64 input
 * events per reader (evdev), a character takes 4 to 6, and an X server that falls behind (just
 * restored, under TCG) loses what overflows (SYN_DROPPED in its log): a typed command then runs
 * garbled. Longer text goes through carrel-guest, whose XTest requests X cannot drop.
 */
#define CARREL_TYPE_KEYS_AUTO_MAX 10

/*
 * The method a type action uses: the one asked for, or for AUTO keys when the US keymap can type
 * every character (carrel_keymap_check_text) and there are at most CARREL_TYPE_KEYS_AUTO_MAX,
 * guest_keysyms otherwise; *ret_keys_fallback (optional) is TRUE when that guest_keysyms may
 * fall back to keys (a guest without carrel-guest). Never clipboard unless asked: which keys
 * paste depends on the application. KEYS asked for text the keymap cannot type is INVALID_ARG.
 */
gboolean carrel_action_choose_type_method(const char *text, CarrelTypeMethod asked,
                                          CarrelTypeMethod *ret_method, gboolean *ret_keys_fallback,
                                          GError **error);

/* A pixel position, in the model's space until carrel_action_batch_check_bounds maps it. */
typedef struct {
    guint x;
    guint y;
} CarrelPoint;

#define CARREL_ACTION_MAX_BATCH 100
#define CARREL_ACTION_MAX_PATH 64
#define CARREL_ACTION_MAX_TEXT 4096
#define CARREL_ACTION_MAX_SCROLL 50
#define CARREL_ACTION_MAX_DURATION_MS 30000
#define CARREL_ACTION_MAX_CLICKS 3
#define CARREL_ACTION_MAX_COORDINATE 65535
#define CARREL_ACTION_MAX_COMBOS 64
#define CARREL_ACTION_MAX_ARGS 64
/* wait without a duration; OSWorld's WAIT is its environment's default pause */
#define CARREL_ACTION_DEFAULT_WAIT_MS 1000
#define CARREL_ACTION_OSWORLD_WAIT_MS 2000
/* OpenAI's scroll_x/scroll_y are pixels; one wheel notch scrolls about this far in browsers. */
#define CARREL_ACTION_SCROLL_PIXELS_PER_NOTCH 100

/*
 * One normalised action. Which members are meaningful depends on kind; the others are zero.
 * Keys are QKeyCode names (see carrel_keymap_lookup), shift already added for shifted
 * characters.
 */
typedef struct {
    CarrelActionKind kind;
    /* mouse_move, click, mouse_down, mouse_up, scroll: where; FALSE = where the pointer is */
    gboolean has_point;
    CarrelPoint point;
    CarrelButton button; /* click, mouse_down, mouse_up */
    guint count;         /* click: 1..CARREL_ACTION_MAX_CLICKS */
    GStrv modifiers;     /* keys held during mouse_move, click, drag, scroll; NULL = none */
    /* drag: CarrelPoint, 2..CARREL_ACTION_MAX_PATH, or 1.. when it starts at the pointer
     * (path_from_pointer, OSWorld's DRAG_TO) */
    GArray *path;
    gboolean path_from_pointer;
    /* scroll, in wheel notches of at most CARREL_ACTION_MAX_SCROLL: dx > 0 right, dy > 0 down */
    int dx;
    int dy;
    /* key: combinations (GStrv each) pressed one after another; key_down, key_up, hold_key:
     * exactly one; type with method clipboard: the paste keys, exactly one */
    GPtrArray *combos;
    /* type: UTF-8 without control characters but '\n', '\t' (keys: printable ASCII, '\n', '\t');
     * clipboard_set: any UTF-8 */
    char *text;
    CarrelTypeMethod method; /* type: chosen at parse time, never AUTO */
    gboolean keys_fallback;  /* type: guest_keysyms chosen by AUTO, keys when the guest lacks it */
    guint duration_ms;       /* wait, hold_key: 0..CARREL_ACTION_MAX_DURATION_MS */
    CarrelPoint region[2];   /* zoom: top-left corner, bottom-right edge (exclusive) */
    char *app;               /* launch: program name or path */
    GStrv args;              /* launch: its arguments; NULL = none */
    char *target;            /* open: URL or path */
    char *element;           /* click_element: the element's id in the accessibility tree */
    gboolean element_action; /* click_element: its default action (mode "action"), not a click */
} CarrelAction;

void carrel_action_free(CarrelAction *action);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelAction, carrel_action_free)

/*
 * When an observation after HID events is taken (see core-settle.c): once the screen differs from
 * the frame before the action and has then stayed the same for quiet_ms; or once it has not
 * changed at all for window_ms after the last event (keys_window_ms when typed text or a key
 * press was among the events); at the latest max_ms after it. fixed_ms > 0 instead waits that
 * long and looks once (the old behaviour, for side-by-side benches).
 */
typedef struct {
    guint window_ms;
    guint keys_window_ms;
    guint quiet_ms;
    guint max_ms;
    guint fixed_ms;
} CarrelSettle;

#define CARREL_SETTLE_WINDOW_MS 250
/* Typed text and key presses nearly always show (an echo, a dialog): a slow guest's late echo is
 * waited for longer before the screen is taken as unchanged. A given window_ms sets both. */
#define CARREL_SETTLE_KEYS_WINDOW_MS 1000
#define CARREL_SETTLE_QUIET_MS 60
#define CARREL_SETTLE_MAX_MS 3000
/* Bound of every settle member: an agent's step is not worth a longer wait. */
#define CARREL_SETTLE_LIMIT_MS 10000

/* The body of POST /v1/sessions/{id}/computer, normalised. */
typedef struct {
    GPtrArray *actions; /* CarrelAction, 1..CARREL_ACTION_MAX_BATCH */
    CarrelObserve observe;
    CarrelSettle settle;
    double scale;      /* model space to screen space factor; 0 = none */
    guint model_width; /* the screen size the model sees; 0 = none (never with scale) */
    guint model_height;
} CarrelActionBatch;

void carrel_action_batch_free(CarrelActionBatch *batch);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelActionBatch, carrel_action_batch_free)

/*
 * Parses one action (not a batch) in any of the formats:
 * - carrel: {"action": NAME, ...} with NAME one of carrel_action_kind_to_string's names and the
 *   members x, y (or coordinate [x, y]), button (left|middle|right|back|forward), count,
 *   modifiers (["ctrl", ...] or "ctrl+shift"), path ([[x, y], ...] or [{x, y}, ...]), dx, dy,
 *   direction (up|down|left|right) with amount, text, combo ("ctrl+shift+t", several separated
 *   by spaces), keys (names pressed together), duration_ms, region [x0, y0, x1, y1], app, args,
 *   target, element (click_element: an accessibility tree id, see carrel_a11y_check_id) with
 *   mode (click|action, default click);
 * - Anthropic computer tool: {"action": ...} with left_click, right_click, middle_click,
 *   double_click, triple_click, left_click_drag, left_mouse_down, left_mouse_up and coordinate,
 *   start_coordinate, scroll_direction, scroll_amount, text (also the keys held by a click or a
 *   scroll), duration (seconds);
 * - OpenAI computer use: {"type": ...} (click, double_click, drag, keypress, move, screenshot,
 *   scroll with scroll_x/scroll_y in pixels, type, wait with optional ms), keys held as "keys";
 * - OSWorld computer_13: {"action_type": ..., "parameters": {...}} or the bare strings "WAIT",
 *   "FAIL", "DONE"; its SCROLL dy > 0 scrolls up (pyautogui), so it is negated here.
 * Unknown actions and members are refused; coordinates are integers 0..65535 (the screen bounds
 * are checked by carrel_action_batch_check_bounds), text is valid UTF-8 of at most
 * CARREL_ACTION_MAX_TEXT bytes, typed text has no control characters but newline and tab (see
 * carrel_action_check_typed_text); a type action takes "method" (auto|keys|guest_keysyms|
 * clipboard, see carrel_action_choose_type_method) and, with clipboard, "paste_keys" (one
 * combination, default "shift+Insert") in every format.
 * Errors are INVALID_ARG naming the member.
 */
CarrelAction *carrel_action_from_json(JsonNode *node, GError **error);

/*
 * Parses a request body: one action (a batch of one, observe "final"), or
 * {"actions": [...], "observe": "final"|"each"|"none", "scale": FACTOR | "model_screen":
 * {"width", "height"}, "settle": {"window_ms", "quiet_ms", "max_ms", "fixed_ms"}} (also with
 * "action": "batch"; settle members 0..CARREL_SETTLE_LIMIT_MS, window_ms <= max_ms, defaults
 * CARREL_SETTLE_*; keys_window_ms is window_ms when given, else the default bounded by max_ms).
 * Batches do not nest. Errors inside the list are prefixed "actions[i]: ".
 */
CarrelActionBatch *carrel_action_batch_from_json(JsonNode *node, GError **error);

/*
 * Maps every position of batch from the model's space to the screen's (width x height) and
 * refuses any outside the screen with INVALID_ARG naming the action, the point and the screen
 * size. A point maps to the screen pixel under the centre of its model pixel,
 * floor((x + 0.5) * factor), so a point on the model screen is always on the real one; zoom
 * regions map their edges, round(x * factor). On success the batch is in screen space and its
 * scale is cleared (a second call only checks); on failure it is unchanged.
 */
gboolean carrel_action_batch_check_bounds(CarrelActionBatch *batch, guint width, guint height,
                                          GError **error);

/* Refuses members of obj outside allowed (NULL-terminated), naming the first unknown one. */
gboolean carrel_conf_check_members(JsonObject *obj, const char *const *allowed, GError **error);

/*
 * A string member, borrowed from obj: absent or null gives NULL, or INVALID_ARG "'MEMBER' is
 * required" when required; any other type is INVALID_ARG "'MEMBER' must be a string". obj may be
 * NULL (a request without a body has no members).
 */
gboolean carrel_conf_get_string_ref(JsonObject *obj, const char *member, gboolean required,
                                    const char **ret_value, GError **error);

/* A new node holding a new, empty object (one reference each: freeing the node frees both). */
JsonNode *carrel_conf_new_object_node(void);
/* Parses a JSON text (bounded by the caller) into a node; errors are CARREL_ERROR_INVALID_ARG. */
JsonNode *carrel_conf_parse_json(const char *data, gsize len, GError **error);

#define CARREL_DEFAULT_VCPUS 1
#define CARREL_DEFAULT_MEMORY_MIB 1024

/*
 * One entry of a session's timeline: an action, a command, a file transfer or a lifecycle step,
 * with who did it, how it ended and how long it took. Parameters are stored without secrets
 * (typed text is kept, it is what the agent did; tokens never reach here).
 */
typedef struct {
    gint64 seq; /* increasing, assigned by the store */
    char *session_id;
    gint64 ts_us;   /* wall clock, microseconds since the epoch */
    char *actor;    /* the caller's name (its token's label) or "carreld" */
    char *actor_id; /* the caller's token id or "carreld"; NULL in events older than it */
    /* "person" for what a person did on the console (kept in the detail); NULL: derived, see
     * carrel_event_actor_kind */
    char *actor_kind;
    char *kind;   /* "action", "command", "file", "lifecycle", "console" */
    char *action; /* e.g. "left_click", "exec", "file_write", "stop" */
    JsonNode *params;
    JsonNode *result; /* NULL when it failed */
    char *error;      /* NULL when it succeeded */
    gint64 duration_ms;
    char *screenshot; /* reference of a screenshot taken with it, or NULL */
} CarrelEvent;

CarrelEvent *carrel_event_new(void);
void carrel_event_free(CarrelEvent *event);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEvent, carrel_event_free)

/* The stored detail of an event (action, params, result, error, duration_ms, screenshot) as
 * JSON text, and back (INVALID_ARG on malformed text). */
char *carrel_event_detail_to_text(const CarrelEvent *event);
gboolean carrel_event_detail_from_text(CarrelEvent *event, const char *text, GError **error);

/* Who acted, as the timeline shows it: "person" (a person's own input on the console),
 * "carreld" (the daemon itself) or "agent" (any caller of the API). */
const char *carrel_event_actor_kind(const CarrelEvent *event);

/* JSON object of an event for the API. */
JsonNode *carrel_event_to_json(const CarrelEvent *event);

/* How a screenshot is returned: cropped to region first, then scaled, then encoded. */
typedef struct {
    gboolean jpeg;  /* PNG otherwise */
    guint quality;  /* JPEG quality 1..100 (default 80) */
    double scale;   /* 0.01..4, 1 = as is */
    guint max_edge; /* 0 = none; else the longer side is at most this (never enlarges) */
    gboolean has_region;
    guint region[4];    /* x, y, width, height in screen pixels */
    gboolean thumbnail; /* a small view for a viewer: neither kept nor on the timeline */
} CarrelScreenshotRequest;

/* A thumbnail's longer side: CARREL_THUMBNAIL_EDGE unless max_edge says less, never more. */
#define CARREL_THUMBNAIL_EDGE 320

/*
 * Reads a screenshot request from URL query parameters (format=png|jpeg, quality, scale,
 * max_edge, region=x,y,w,h, thumbnail=1|0; query may be NULL). Unknown parameters, values out
 * of range and scale together with max_edge are INVALID_ARG. A thumbnail is scaled to at most
 * CARREL_THUMBNAIL_EDGE (scale and region are refused with it): it is for a viewer's glance,
 * never a way to take unrecorded full screenshots.
 */
gboolean carrel_screenshot_request_parse(GHashTable *query, CarrelScreenshotRequest *ret_req,
                                         GError **error);

/*
 * MCP, the Model Context Protocol (conf-mcp.c, conf-mcp-tools.c): JSON-RPC 2.0 messages as
 * POST /mcp and `carrel mcp` carry them, the protocol versions carrel speaks, its tools with
 * their input schemas, and the pure parts of running them (arguments in, results out).
 */
#define CARREL_MCP_PROTOCOL_VERSION "2025-06-18"

/* JSON-RPC 2.0 error codes, plus -32000 for carreld refusing or being out of reach. */
typedef enum {
    CARREL_MCP_PARSE_ERROR = -32700,
    CARREL_MCP_INVALID_REQUEST = -32600,
    CARREL_MCP_METHOD_NOT_FOUND = -32601,
    CARREL_MCP_INVALID_PARAMS = -32602,
    CARREL_MCP_INTERNAL_ERROR = -32603,
    CARREL_MCP_SERVER_ERROR = -32000,
} CarrelMcpErrorCode;

typedef enum {
    CARREL_MCP_MESSAGE_REQUEST,      /* method and id: answered */
    CARREL_MCP_MESSAGE_NOTIFICATION, /* method, no id: never answered */
    CARREL_MCP_MESSAGE_RESPONSE,     /* result or error, no method: carrel sends no requests */
    CARREL_MCP_MESSAGE_LAST
} CarrelMcpMessageKind;

/* One JSON-RPC message. */
typedef struct {
    CarrelMcpMessageKind kind;
    JsonNode *id;     /* string or number; NULL for a notification */
    char *method;     /* NULL for a response */
    JsonNode *params; /* an object, or NULL */
} CarrelMcpMessage;

void carrel_mcp_message_free(CarrelMcpMessage *msg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelMcpMessage, carrel_mcp_message_free)

/*
 * Reads one JSON-RPC 2.0 message: "jsonrpc" must be "2.0", "id" a string or a number, "method"
 * a string, "params" an object. Batches (arrays) are refused: MCP 2025-06-18 has none.
 * INVALID_ARG (JSON-RPC's "invalid request") otherwise.
 */
CarrelMcpMessage *carrel_mcp_message_from_json(JsonNode *node, GError **error);

/* The id of a message that may be invalid, for the error reply: a copy, or a JSON null. */
JsonNode *carrel_mcp_message_id(JsonNode *node);

/* {"jsonrpc": "2.0", "id": id, "result": result}; takes result, copies id (NULL: null). */
JsonNode *carrel_mcp_result_reply(JsonNode *id, JsonNode *result);

/* {"jsonrpc": "2.0", "id": id, "error": {"code", "message"}}; copies id (NULL: null). */
JsonNode *carrel_mcp_error_reply(JsonNode *id, CarrelMcpErrorCode code, const char *message);

/* TRUE for the protocol versions carrel speaks: 2025-06-18, 2025-03-26, 2024-11-05. */
gboolean carrel_mcp_version_supported(const char *version);

/* The version to answer initialize with: the client's when supported, else the latest. */
const char *carrel_mcp_version_negotiate(const char *requested);

/*
 * TRUE when an HTTP Origin names this host: its host is 127.0.0.1, ::1 or localhost (any
 * scheme and port). Web pages elsewhere must not reach a local MCP server (DNS rebinding).
 */
gboolean carrel_mcp_origin_is_local(const char *origin);

/* carrel's MCP tools. */
typedef enum {
    CARREL_MCP_TOOL_SANDBOX_CREATE,
    CARREL_MCP_TOOL_SANDBOX_LIST,
    CARREL_MCP_TOOL_SANDBOX_DESTROY,
    CARREL_MCP_TOOL_SANDBOX_PAUSE,
    CARREL_MCP_TOOL_SANDBOX_RESUME,
    CARREL_MCP_TOOL_SNAPSHOT_CREATE,
    CARREL_MCP_TOOL_SNAPSHOT_REVERT,
    CARREL_MCP_TOOL_COMPUTER,
    CARREL_MCP_TOOL_SCREENSHOT,
    CARREL_MCP_TOOL_COMMAND_RUN,
    CARREL_MCP_TOOL_FILE_READ,
    CARREL_MCP_TOOL_FILE_WRITE,
    CARREL_MCP_TOOL_SANDBOX_HIBERNATE,
    CARREL_MCP_TOOL_SANDBOX_FORK,
    CARREL_MCP_TOOL_SNAPSHOT_LIST,
    CARREL_MCP_TOOL_FILE_LIST,
    CARREL_MCP_TOOL_FILE_STAT,
    CARREL_MCP_TOOL_FILE_MKDIR,
    CARREL_MCP_TOOL_FILE_REMOVE,
    CARREL_MCP_TOOL_FILE_MOVE,
    CARREL_MCP_TOOL_PROCESS_START,
    CARREL_MCP_TOOL_PROCESS_LIST,
    CARREL_MCP_TOOL_PROCESS_READ,
    CARREL_MCP_TOOL_PROCESS_KILL,
    CARREL_MCP_TOOL_ACCESSIBILITY,
    CARREL_MCP_TOOL_LAST
} CarrelMcpTool;

const char *carrel_mcp_tool_to_string(CarrelMcpTool tool);
/* Returns CARREL_MCP_TOOL_LAST for unknown names. */
CarrelMcpTool carrel_mcp_tool_from_string(const char *name);

/*
 * The result of tools/list: {"tools": [{name, title, description, inputSchema, annotations}]}.
 * Each inputSchema is generated from the same table carrel_mcp_tool_arguments checks against.
 */
JsonNode *carrel_mcp_tools_list(void);

/*
 * Checks a tool's arguments (NULL or an object) against its input schema: known members only
 * (the computer tool passes others on to the action parser), types, ranges, choices, required
 * members. Members that are null count as absent. Returns a copy without them, or INVALID_ARG
 * naming the member.
 */
JsonObject *carrel_mcp_tool_arguments(CarrelMcpTool tool, JsonNode *arguments, GError **error);

/*
 * command_run's checked arguments as an exec request: "command" runs as /bin/sh -c COMMAND,
 * "argv" as given; exactly one of them. INVALID_ARG or LIMIT otherwise.
 */
CarrelExecRequest *carrel_mcp_exec_request_from_arguments(JsonObject *args, GError **error);

/*
 * file_write's checked arguments: "content" as UTF-8 text (the default) or, with "encoding":
 * "base64", decoded (strict alphabet and padding, whitespace ignored), at most
 * CARREL_LIMIT_FILE_BYTES.
 */
GBytes *carrel_mcp_file_content_from_arguments(JsonObject *args, GError **error);

/* A tools/call read: the tool, and its arguments checked against its schema and typed. */
typedef struct {
    CarrelMcpTool tool;
    char *session;                /* the sandbox; NULL for sandbox_create and sandbox_list */
    char *name;                   /* snapshot_create, snapshot_revert: the snapshot */
    char *path;                   /* file_*: the path in the guest */
    char *to;                     /* file_move: the destination */
    gboolean flag;                /* file_mkdir: parents; file_remove: recursive */
    char *snapshot;               /* sandbox_fork: NULL = one taken now */
    guint count;                  /* sandbox_fork: how many (1 unless given) */
    CarrelSessionRequest *create; /* sandbox_create */
    CarrelExecRequest *exec;      /* command_run, process_start */
    char *handle;                 /* process_read, process_kill */
    gint64 stdout_offset;         /* process_read */
    gint64 stderr_offset;
    int signal;            /* process_kill: TERM unless given */
    GBytes *content;       /* file_write: the content, decoded */
    JsonNode *action;      /* computer: the arguments but session (the action) */
    gboolean a11y_desktop; /* accessibility_tree: scope desktop */
    guint a11y_depth;      /* accessibility_tree: CARREL_A11Y_DEFAULT_DEPTH unless given */
    guint a11y_max_nodes;  /* accessibility_tree: CARREL_A11Y_DEFAULT_NODES unless given */
    char *a11y_app;        /* accessibility_tree: one application only, or NULL */
} CarrelMcpCall;

void carrel_mcp_call_free(CarrelMcpCall *call);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelMcpCall, carrel_mcp_call_free)

/* The tool a tools/call's params (an object or NULL) name in "name"; INVALID_ARG otherwise,
 * with the text the client is shown. */
gboolean carrel_mcp_call_tool(JsonNode *params, CarrelMcpTool *ret_tool, GError **error);

/* tool's call from the params' "arguments": checked (carrel_mcp_tool_arguments), then typed
 * (a session or exec request, file content); INVALID_ARG or LIMIT naming the member. */
CarrelMcpCall *carrel_mcp_call_from_params(CarrelMcpTool tool, JsonNode *params, GError **error);

/* The version to answer initialize with, from its params' "protocolVersion" (a string);
 * INVALID_ARG when there is none. */
const char *carrel_mcp_initialize_version(JsonNode *params, GError **error);

/* A tool result: {"content": [...], "structuredContent"?: ..., "isError": is_error}; takes
 * content and structured (may be NULL). */
JsonNode *carrel_mcp_tool_result(JsonArray *content, JsonNode *structured, gboolean is_error);

/* A tool result for one text, with structured as its structured content (taken, may be NULL). */
JsonNode *carrel_mcp_text_result(const char *text, JsonNode *structured, gboolean is_error);

/* A tool result for a value: the value's JSON as text, and the value as structured content. */
JsonNode *carrel_mcp_json_result(JsonNode *value);

/* A failed tool call: isError, the text "CODE: MESSAGE" and {"error": {code, message}}. */
JsonNode *carrel_mcp_error_result(const GError *error);

/* Image content {"type": "image", "data": base64, "mimeType"}. */
JsonNode *carrel_mcp_image_content(GBytes *image, const char *mime_type);

/*
 * file_read's result: the file as text content when it is valid UTF-8 without NUL bytes, else
 * an embedded resource {uri, mimeType: application/octet-stream, blob: base64}; structured
 * content {path, bytes, encoding: "utf-8"|"base64"}. uri names the file for the client.
 */
JsonNode *carrel_mcp_file_result(const char *uri, const char *path, GBytes *data);

/*
 * The computer tool's result from carrel_manager_session_computer's reply: every image in it
 * (per-action screenshots and outputs, then the final observation) as image content, then the
 * reply without image data as text and as structured content.
 */
JsonNode *carrel_mcp_computer_result(JsonNode *reply);

/* command_run's result: exit code, stdout and stderr as text; the exec result as structured
 * content. A command that ran is never an error here, whatever its exit code. */
JsonNode *carrel_mcp_exec_result(const CarrelExecResult *result);

/* Kinds of files carrel reports from a guest. */
typedef enum {
    CARREL_FILE_REGULAR,
    CARREL_FILE_DIR,
    CARREL_FILE_SYMLINK,
    CARREL_FILE_HARDLINK,
    CARREL_FILE_OTHER, /* device, FIFO, socket */
    CARREL_FILE_LAST
} CarrelFileType;

/* "file", "dir", "symlink", "hardlink", "other"; from_string gives CARREL_FILE_LAST for others. */
const char *carrel_file_type_to_string(CarrelFileType type);
CarrelFileType carrel_file_type_from_string(const char *name);

/* One entry taken out of a session: a file or folder written under the extraction's dir, or
 * the record of something never created on the host (a link, a device, a refused name). */
typedef struct {
    char *id;            /* "a-" + 12 hex */
    char *extraction_id; /* "x-" + 12 hex */
    char *session_id;
    char *guest_path;
    char *path; /* relative to the extraction's dir; NULL when not written */
    CarrelFileType type;
    guint64 size;
    guint32 mode;
    gint64 uid;
    gint64 gid;
    gint64 mtime;
    char *sha256;      /* regular files written */
    char *link_target; /* links: the target's text, never resolved */
    char *skipped;     /* why the entry was not written, or NULL */
    gint64 created_at;
} CarrelArtifact;

CarrelArtifact *carrel_artifact_new(void);
void carrel_artifact_free(CarrelArtifact *artifact);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelArtifact, carrel_artifact_free)
JsonNode *carrel_artifact_to_json(const CarrelArtifact *artifact);

/* One extraction: the paths asked for, what came out, what could not. */
typedef struct {
    char *id;
    char *session_id;
    char *reason; /* "request", or the exit that collected it: "stop", "crash", "destroy" */
    char *source; /* "agent" (running guest) or "disk" (libguestfs, read-only) */
    char *dir;    /* artifacts/<id> under the state dir */
    GStrv paths;
    JsonNode *missing; /* [{path, error}] for paths that could not be taken, or NULL */
    char *error;       /* set when the extraction stopped early (a limit); what came stays */
    guint64 bytes;
    guint count;
    gint64 duration_ms;
    gint64 created_at;
    GPtrArray *artifacts; /* CarrelArtifact */
} CarrelExtraction;

CarrelExtraction *carrel_extraction_new(void);
void carrel_extraction_free(CarrelExtraction *x);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelExtraction, carrel_extraction_free)
JsonNode *carrel_extraction_to_json(const CarrelExtraction *x);
/* paths, missing, error, bytes, count, duration_ms as stored JSON text, and back. */
char *carrel_extraction_detail_to_text(const CarrelExtraction *x);
gboolean carrel_extraction_detail_from_text(CarrelExtraction *x, const char *text, GError **error);

/* {paths: [...], max_bytes_mib?, max_files?}: what to take out of a session. */
typedef struct {
    GStrv paths;
    guint64 max_bytes;
    guint max_files;
} CarrelExtractRequest;

void carrel_extract_request_free(CarrelExtractRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelExtractRequest, carrel_extract_request_free)
CarrelExtractRequest *carrel_extract_request_from_json(JsonNode *node, GError **error);
/* At least one path; each absolute and clean (carrel_util_check_guest_path), never "/". */
gboolean carrel_extract_check_paths(char **paths, GError **error);

/* A file that differs between a session's disk and its template. */
typedef enum { CARREL_DIFF_ADDED, CARREL_DIFF_CHANGED, CARREL_DIFF_REMOVED } CarrelDiffChange;

typedef struct {
    char *path; /* absolute guest path */
    CarrelDiffChange change;
    CarrelFileType type;
    guint64 size;
    guint32 mode;
    char *sha256; /* changed regular files: the new content's hash */
} CarrelDiffEntry;

void carrel_diff_entry_free(CarrelDiffEntry *entry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelDiffEntry, carrel_diff_entry_free)
/* {added: [...], changed: [...], removed: [...]}, each in the order of entries. */
JsonNode *carrel_diff_to_json(GPtrArray *entries);

/* TRUE for "destroy", "stop", "hibernate", "pause": what a session's time limit does. */
gboolean carrel_expiry_action_is_valid(const char *action);

/* A snapshot of a session: a frozen disk layer and, when the session ran, its saved memory. */
typedef struct {
    char *id; /* "p-" + 12 hex */
    char *session_id;
    char *name;
    char *parent;       /* the snapshot the session descended from when this was taken, or NULL */
    char *layer_path;   /* frozen qcow2 layer (read-only from then on) */
    char *memory_path;  /* libvirt save image, NULL for a disk-only snapshot */
    char *memory_file;  /* its RAM, when not in the save image (a warm clone's snapshot) */
    guint64 size_bytes; /* layer + memory on disk (filled when listed) */
    gint64 created_at;
    JsonNode *timings; /* as CarrelSession's: the snapshot that made it (not stored), or NULL */
} CarrelSnapshot;

CarrelSnapshot *carrel_snapshot_new(void);
void carrel_snapshot_free(CarrelSnapshot *snap);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSnapshot, carrel_snapshot_free)
/* {id, name, parent, memory: bool, size_bytes, created_at} */
JsonNode *carrel_snapshot_to_json(const CarrelSnapshot *snap);
/* A snapshot name: like a session name ([a-z0-9._-], 1-63). */
gboolean carrel_snapshot_check_name(const char *name, GError **error);

G_END_DECLS

/* Principals, operations, tokens, audit records. */
#define CARREL_CONF_H_INSIDE
#include "conf/conf-trust.h"
/* The bodies of API requests that are not records of their own. */
#include "conf/conf-requests.h"
/* Guest file operations' replies and paths. */
#include "conf/conf-fsops.h"
/* Background processes in a guest. */
#include "conf/conf-proc.h"
/* The accessibility tree of a guest's desktop. */
#include "conf/conf-a11y.h"
/* Screen sizes, template defaults and a new session's machine shape. */
#include "conf/conf-screen.h"
/* Approvals and the egress log: what reviewers decide and read. */
#include "conf/conf-review.h"
#undef CARREL_CONF_H_INSIDE
