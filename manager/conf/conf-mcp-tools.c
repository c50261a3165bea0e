/*
 * carrel's MCP tools: one table gives each tool's parameters, from which tools/list generates
 * the JSON Schema and tools/call checks the arguments, so the two never disagree.
 */
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

typedef enum {
    PARAM_STRING,
    PARAM_INTEGER,
    PARAM_NUMBER,
    PARAM_STRINGS,  /* array of strings */
    PARAM_INTEGERS, /* array of integers */
    PARAM_BOOLEAN,
} ParamType;

typedef struct {
    const char *name;
    ParamType type;
    gboolean required;
    const char *description;
    /* integers and numbers: the value's range; arrays: the number of items; both 0 = none */
    gint64 min;
    gint64 max;
    const char *const *choices; /* strings: the accepted values, or NULL */
} Param;

typedef struct {
    const char *name;
    const char *title;
    const char *description;
    const Param *params; /* terminated by a NULL name */
    gboolean open;       /* members beyond params are passed on (checked by the callee) */
    gboolean read_only;
    gboolean destructive;
} Tool;

#define SESSION_PARAM                                                                              \
    {                                                                                              \
        "session", PARAM_STRING, TRUE,                                                             \
            "The sandbox: its session id (s-...) or name, as sandbox_create and sandbox_list "     \
            "give it",                                                                             \
            0, 0, NULL                                                                             \
    }
#define PARAM_END                                                                                  \
    {                                                                                              \
        NULL, 0, FALSE, NULL, 0, 0, NULL                                                           \
    }

static const char *const encodings[] = {"utf-8", "base64", NULL};
static const char *const directions[] = {"up", "down", "left", "right", NULL};
static const char *const type_methods[] = {"auto", "keys", "guest_keysyms", "clipboard", NULL};
static const char *const a11y_scopes[] = {"focused", "desktop", NULL};
static const char *const element_modes[] = {"click", "action", NULL};

static const Param create_params[] = {
    {"template", PARAM_STRING, TRUE,
     "Template to boot, NAME or NAME@VERSION (for example 'tiny' or 'desktop')", 0, 0, NULL},
    {"name", PARAM_STRING, FALSE,
     "A unique name for the sandbox: 1-63 of [a-z0-9._-], not starting with 's-'", 0, 0, NULL},
    {"policy", PARAM_STRING, FALSE,
     "The named policy it runs under (default 'default'; GET /v1/policies lists them)", 0, 0, NULL},
    {"vcpus", PARAM_INTEGER, FALSE, "Virtual CPUs (default: the template's, else 1)", 1,
     CARREL_LIMIT_VCPUS, NULL},
    {"memory_mib", PARAM_INTEGER, FALSE, "Memory in MiB (default: the template's, else 1024)",
     CARREL_LIMIT_MIN_MEMORY_MIB, CARREL_LIMIT_MEMORY_MIB, NULL},
    {"screen", PARAM_STRING, FALSE,
     "Screen size WIDTHxHEIGHT, 640x480 to 1920x1200, the width a multiple of 8 (default: the "
     "template's)",
     0, 0, NULL},
    PARAM_END,
};

static const Param no_params[] = {PARAM_END};

static const Param session_params[] = {SESSION_PARAM, PARAM_END};

static const Param snapshot_params[] = {
    SESSION_PARAM,
    {"name", PARAM_STRING, TRUE, "Name of the snapshot", 0, 0, NULL},
    PARAM_END,
};

static const Param fork_params[] = {
    SESSION_PARAM,
    {"snapshot", PARAM_STRING, FALSE,
     "Snapshot to fork from (default: one taken now, the sandbox pausing a few seconds)", 0, 0,
     NULL},
    {"count", PARAM_INTEGER, FALSE, "How many sandboxes (default 1)", 1, CARREL_LIMIT_FORKS, NULL},
    PARAM_END,
};

static const Param computer_params[] = {
    SESSION_PARAM,
    {"action", PARAM_STRING, TRUE,
     "screenshot, left_click, right_click, middle_click, double_click, triple_click, "
     "mouse_move, left_click_drag, left_mouse_down, left_mouse_up, scroll, type, key, "
     "hold_key, wait, cursor_position, zoom; also carrel's clipboard_get, clipboard_set, "
     "windows, launch, open, click_element (with 'element' from accessibility_tree), and batch "
     "(with 'actions': [...])",
     0, 0, NULL},
    {"element", PARAM_STRING, FALSE,
     "click_element: the element's id, as accessibility_tree gives it (like '0.0.0.1.0')", 0, 0,
     NULL},
    {"mode", PARAM_STRING, FALSE,
     "click_element: click (default: the pointer clicks the element's centre, looked up again) "
     "or action (its default accessibility action, without the pointer)",
     0, 0, element_modes},
    {"coordinate", PARAM_INTEGERS, FALSE, "[x, y] in screenshot pixels", 2, 2, NULL},
    {"start_coordinate", PARAM_INTEGERS, FALSE, "left_click_drag: [x, y] where the drag starts", 2,
     2, NULL},
    {"text", PARAM_STRING, FALSE,
     "type: the text (any Unicode; newline and tab, no other control characters); key: xdotool "
     "keys such as 'ctrl+s' or 'Return'; clicks and scroll: keys held meanwhile",
     0, 0, NULL},
    {"method", PARAM_STRING, FALSE,
     "type: how the text is typed. auto (default): key presses when the US keymap has every "
     "character, else keysyms typed in the guest; clipboard: pasted (see paste_keys). The result "
     "says which was used",
     0, 0, type_methods},
    {"paste_keys", PARAM_STRING, FALSE,
     "type with method clipboard: the keys that paste (default 'shift+Insert', which pastes in "
     "terminals and text fields alike; 'ctrl+v' or 'ctrl+shift+v' for apps that want those)",
     0, 0, NULL},
    {"scroll_direction", PARAM_STRING, FALSE, "scroll: which way", 0, 0, directions},
    {"scroll_amount", PARAM_INTEGER, FALSE, "scroll: wheel notches", 0, 0, NULL},
    {"duration", PARAM_NUMBER, FALSE, "wait, hold_key: seconds", 0, 0, NULL},
    {"region", PARAM_INTEGERS, FALSE, "zoom: [x0, y0, x1, y1], the part of the screen to see", 4, 4,
     NULL},
    PARAM_END,
};

static const Param command_params[] = {
    SESSION_PARAM,
    {"command", PARAM_STRING, FALSE,
     "A shell command line, run as /bin/sh -c COMMAND (give command or argv)", 0, 0, NULL},
    {"argv", PARAM_STRINGS, FALSE, "Program and arguments, run without a shell", 1,
     CARREL_EXEC_MAX_ARGS, NULL},
    {"timeout_s", PARAM_INTEGER, FALSE, "Seconds before the command is killed (default 60)", 1,
     CARREL_EXEC_MAX_TIMEOUT_S, NULL},
    {"cwd", PARAM_STRING, FALSE, "Working directory: an absolute path in the guest", 0, 0, NULL},
    PARAM_END,
};

static const Param process_read_params[] = {
    SESSION_PARAM,
    {"handle", PARAM_STRING, TRUE, "The process, as process_start or process_list give it", 0, 0,
     NULL},
    {"stdout_offset", PARAM_INTEGER, FALSE,
     "Byte offset of stdout to read from (stdout_next of the last read; default 0)", 0,
     CARREL_PROC_OUTPUT_MAX, NULL},
    {"stderr_offset", PARAM_INTEGER, FALSE, "Byte offset of stderr to read from (default 0)", 0,
     CARREL_PROC_OUTPUT_MAX, NULL},
    PARAM_END,
};

static const char *const signal_names[] = {"TERM", "KILL", "INT",  "HUP",  "QUIT",
                                           "USR1", "USR2", "STOP", "CONT", NULL};

static const Param process_kill_params[] = {
    SESSION_PARAM,
    {"handle", PARAM_STRING, TRUE, "The process, as process_start or process_list give it", 0, 0,
     NULL},
    {"signal", PARAM_STRING, FALSE, "The signal (default TERM)", 0, 0, signal_names},
    PARAM_END,
};

static const Param file_read_params[] = {
    SESSION_PARAM,
    {"path", PARAM_STRING, TRUE, "Absolute path of the file in the guest", 0, 0, NULL},
    PARAM_END,
};

static const Param file_write_params[] = {
    SESSION_PARAM,
    {"path", PARAM_STRING, TRUE, "Absolute path of the file in the guest (created or replaced)", 0,
     0, NULL},
    {"content", PARAM_STRING, TRUE, "The file's content, as text or base64 (see encoding)", 0, 0,
     NULL},
    {"encoding", PARAM_STRING, FALSE, "How content is given: utf-8 text (default) or base64", 0, 0,
     encodings},
    PARAM_END,
};

#define FS_PATH_PARAM(what)                                                                        \
    {                                                                                              \
        "path", PARAM_STRING, TRUE, "Absolute, normalised path in the guest" what, 0, 0, NULL      \
    }

static const Param fs_path_params[] = {SESSION_PARAM, FS_PATH_PARAM(""), PARAM_END};

static const Param fs_mkdir_params[] = {
    SESSION_PARAM,
    FS_PATH_PARAM(" of the new directory"),
    {"parents", PARAM_BOOLEAN, FALSE,
     "Create missing parents too; an existing directory is then no error", 0, 0, NULL},
    PARAM_END,
};

static const Param fs_remove_params[] = {
    SESSION_PARAM,
    FS_PATH_PARAM(" to remove"),
    {"recursive", PARAM_BOOLEAN, FALSE,
     "Remove a directory with everything in it (symlinks are removed, never followed)", 0, 0, NULL},
    PARAM_END,
};

static const Param fs_move_params[] = {
    SESSION_PARAM,
    {"path", PARAM_STRING, TRUE, "Absolute path to move", 0, 0, NULL},
    {"to", PARAM_STRING, TRUE, "Absolute destination path; it must not exist", 0, 0, NULL},
    PARAM_END,
};

static const Param a11y_params[] = {
    SESSION_PARAM,
    {"scope", PARAM_STRING, FALSE,
     "focused (default): the active window's tree (the desktop's when none is active); desktop: "
     "every application's",
     0, 0, a11y_scopes},
    {"depth", PARAM_INTEGER, FALSE, "Levels below the root (default 12)", 0, CARREL_A11Y_MAX_DEPTH,
     NULL},
    {"max_nodes", PARAM_INTEGER, FALSE,
     "Elements at most, breadth first, documents first (default 500)", 1, CARREL_A11Y_MAX_NODES,
     NULL},
    {"app", PARAM_STRING, FALSE,
     "The desktop with only this application (its accessibility name, e.g. Firefox): the budget "
     "goes to it alone",
     0, 0, NULL},
    PARAM_END,
};

static const Tool tools[CARREL_MCP_TOOL_LAST] = {
    [CARREL_MCP_TOOL_SANDBOX_CREATE] =
        {"sandbox_create", "Create a sandbox",
         "Creates a sandbox: a new desktop virtual machine booted from a template, isolated "
         "from the host. Returns once its guest agent answers (seconds when the template is "
         "warm, minutes on a host without KVM), with the session: id, name, state and shape.",
         create_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_SANDBOX_LIST] = {"sandbox_list", "List sandboxes",
                                      "Lists the sandboxes that are not destroyed: id, name, "
                                      "template, state, vcpus, memory.",
                                      no_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_SANDBOX_DESTROY] = {"sandbox_destroy", "Destroy a sandbox",
                                         "Destroys a sandbox: powers the VM off and deletes its "
                                         "disk. Everything in it is lost.",
                                         session_params, FALSE, FALSE, TRUE},
    [CARREL_MCP_TOOL_SANDBOX_PAUSE] = {"sandbox_pause", "Pause a sandbox",
                                       "Pauses a running sandbox: its vCPUs stop, its memory "
                                       "stays. sandbox_resume continues it.",
                                       session_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_SANDBOX_RESUME] = {"sandbox_resume", "Resume a sandbox",
                                        "Resumes a paused (or hibernated) sandbox.", session_params,
                                        FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_SNAPSHOT_CREATE] = {"snapshot_create", "Snapshot a sandbox",
                                         "Saves a sandbox's disk and memory as a named snapshot "
                                         "(the sandbox pauses for a few seconds, then runs on).",
                                         snapshot_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_SNAPSHOT_REVERT] = {"snapshot_revert", "Revert a sandbox to a snapshot",
                                         "Puts a sandbox back to a named snapshot, disk and "
                                         "memory, losing what happened since.",
                                         snapshot_params, FALSE, FALSE, TRUE},
    [CARREL_MCP_TOOL_SANDBOX_HIBERNATE] = {"sandbox_hibernate", "Hibernate a sandbox",
                                           "Saves a sandbox's memory to disk and ends its VM "
                                           "process: it holds no CPU or RAM until "
                                           "sandbox_resume restores it.",
                                           session_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_SANDBOX_FORK] = {"sandbox_fork", "Fork a sandbox",
                                      "Starts new sandboxes from a snapshot's memory, each on "
                                      "its own disk, running side by side. Returns them.",
                                      fork_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_SNAPSHOT_LIST] = {"snapshot_list", "List a sandbox's snapshots",
                                       "Lists a sandbox's snapshots: id, name, parent, whether "
                                       "it has memory, size.",
                                       session_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_COMPUTER] =
        {"computer", "Use the sandbox's desktop",
         "Sees and drives the sandbox's screen, mouse and keyboard, like Anthropic's computer "
         "tool (the same actions and members; OpenAI, OSWorld and carrel formats work too). "
         "Input goes through the hypervisor. Returns a screenshot taken after the action, and "
         "the action's results as JSON (pointer position, screen size, outputs).",
         computer_params, TRUE, FALSE, FALSE},
    [CARREL_MCP_TOOL_SCREENSHOT] = {"screenshot", "Take a screenshot",
                                    "Returns the sandbox's screen as a PNG image, taken by the "
                                    "hypervisor.",
                                    session_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_COMMAND_RUN] =
        {"command_run", "Run a command in a sandbox",
         "Runs a command in the sandbox through its guest agent and waits for it: give "
         "'command' (a shell line) or 'argv'. Returns the exit code, stdout and stderr (each "
         "bounded); a non-zero exit code is a result, not an error.",
         command_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_FILE_READ] = {"file_read", "Read a file in a sandbox",
                                   "Reads a file of the sandbox (up to 32 MiB): returned as text "
                                   "when it is UTF-8, else as a base64 blob resource.",
                                   file_read_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_FILE_WRITE] = {"file_write", "Write a file in a sandbox",
                                    "Writes a file of the sandbox, creating or replacing it "
                                    "(up to 32 MiB; text, or base64 for binary content).",
                                    file_write_params, FALSE, FALSE, TRUE},
    [CARREL_MCP_TOOL_FILE_LIST] =
        {"file_list", "List a directory in a sandbox",
         "Lists a directory of the sandbox: each entry's name, type (file, dir, symlink, other), "
         "size, mode (octal text), mtime (Unix seconds) and symlink target. Names that are not "
         "clean text come back null with an escaped form. At most 4096 entries.",
         fs_path_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_FILE_STAT] = {"file_stat", "Stat a path in a sandbox",
                                   "One path's entry, as file_list gives it (a symlink itself, "
                                   "not its target).",
                                   fs_path_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_FILE_MKDIR] = {"file_mkdir", "Create a directory in a sandbox",
                                    "Creates a directory of the sandbox (mode 0755, as root).",
                                    fs_mkdir_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_FILE_REMOVE] = {"file_remove", "Remove a path in a sandbox",
                                     "Removes a file, symlink or empty directory of the sandbox; "
                                     "with recursive, a whole directory.",
                                     fs_remove_params, FALSE, FALSE, TRUE},
    [CARREL_MCP_TOOL_FILE_MOVE] = {"file_move", "Move a path in a sandbox",
                                   "Renames a path of the sandbox; the destination must not "
                                   "exist.",
                                   fs_move_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_PROCESS_START] =
        {"process_start", "Start a background command in a sandbox",
         "Starts a command in the sandbox and returns at once with its handle (give 'command' "
         "or 'argv'); it runs until it ends or process_kill. Read its output with process_read.",
         command_params, FALSE, FALSE, FALSE},
    [CARREL_MCP_TOOL_ACCESSIBILITY] =
        {"accessibility_tree", "Read the accessibility tree of a sandbox's desktop",
         "The desktop's UI elements as the applications describe them (AT-SPI): each with an id, "
         "role, name, states, screen bounds, default action and children. Act on one with the "
         "computer tool's click_element action and its id; ids stay valid while the window keeps "
         "its shape. Needs applications with accessibility support (GTK, Qt, browsers).",
         a11y_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_PROCESS_LIST] = {"process_list", "List a sandbox's background commands",
                                      "The sandbox's background processes, oldest first: handle, "
                                      "argv, pid, state, exit code, output sizes.",
                                      session_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_PROCESS_READ] =
        {"process_read", "Read a background command's output",
         "Its state, exit code and output from the given byte offsets (at most 48 KiB a "
         "stream); read again from stdout_next/stderr_next while 'more' is true or it runs.",
         process_read_params, FALSE, TRUE, FALSE},
    [CARREL_MCP_TOOL_PROCESS_KILL] = {"process_kill", "Signal a background command",
                                      "Sends a signal (TERM by default) to the process and what "
                                      "it started.",
                                      process_kill_params, FALSE, FALSE, TRUE},
};

const char *
carrel_mcp_tool_to_string(CarrelMcpTool tool)
{
    return tool < CARREL_MCP_TOOL_LAST ? tools[tool].name : "unknown";
}

CarrelMcpTool
carrel_mcp_tool_from_string(const char *name)
{
    for (int i = 0; name && i < CARREL_MCP_TOOL_LAST; i++) {
        if (g_str_equal(tools[i].name, name))
            return (CarrelMcpTool)i;
    }
    return CARREL_MCP_TOOL_LAST;
}

static gboolean
has_range(const Param *p)
{
    return p->min != 0 || p->max != 0;
}

static JsonObject *
param_schema(const Param *p)
{
    static const char *const type_names[] = {"string", "integer", "number",
                                             "array",  "array",   "boolean"};
    JsonObject *obj = json_object_new();

    json_object_set_string_member(obj, "type", type_names[p->type]);
    json_object_set_string_member(obj, "description", p->description);
    if (p->choices) {
        JsonArray *choices = json_array_new();
        for (guint i = 0; p->choices[i]; i++)
            json_array_add_string_element(choices, p->choices[i]);
        json_object_set_array_member(obj, "enum", choices);
    }
    if (p->type == PARAM_STRINGS || p->type == PARAM_INTEGERS) {
        JsonObject *items = json_object_new();
        json_object_set_string_member(items, "type",
                                      p->type == PARAM_STRINGS ? "string" : "integer");
        json_object_set_object_member(obj, "items", items);
        if (has_range(p)) {
            json_object_set_int_member(obj, "minItems", p->min);
            json_object_set_int_member(obj, "maxItems", p->max);
        }
    } else if (has_range(p)) {
        json_object_set_int_member(obj, "minimum", p->min);
        json_object_set_int_member(obj, "maximum", p->max);
    }
    return obj;
}

static JsonObject *
input_schema(const Tool *tool)
{
    JsonObject *schema = json_object_new();
    JsonObject *props = json_object_new();
    JsonArray *required = json_array_new();

    json_object_set_string_member(schema, "type", "object");
    for (const Param *p = tool->params; p->name; p++) {
        json_object_set_object_member(props, p->name, param_schema(p));
        if (p->required)
            json_array_add_string_element(required, p->name);
    }
    json_object_set_object_member(schema, "properties", props);
    json_object_set_array_member(schema, "required", required);
    json_object_set_boolean_member(schema, "additionalProperties", tool->open);
    return schema;
}

JsonNode *
carrel_mcp_tools_list(void)
{
    JsonArray *list = json_array_new();
    JsonObject *root = json_object_new();
    JsonNode *node = json_node_init_object(json_node_alloc(), root);

    for (int i = 0; i < CARREL_MCP_TOOL_LAST; i++) {
        const Tool *tool = &tools[i];
        JsonObject *obj = json_object_new();
        JsonObject *hints = json_object_new();

        json_object_set_string_member(obj, "name", tool->name);
        json_object_set_string_member(obj, "title", tool->title);
        json_object_set_string_member(obj, "description", tool->description);
        json_object_set_object_member(obj, "inputSchema", input_schema(tool));
        json_object_set_boolean_member(hints, "readOnlyHint", tool->read_only);
        if (!tool->read_only)
            json_object_set_boolean_member(hints, "destructiveHint", tool->destructive);
        json_object_set_boolean_member(hints, "openWorldHint", FALSE);
        json_object_set_object_member(obj, "annotations", hints);
        json_array_add_object_element(list, obj);
    }
    json_object_set_array_member(root, "tools", list);
    json_object_unref(root);
    return node;
}

static gboolean
check_range(const Param *p, gint64 value, const char *what, GError **error)
{
    if (has_range(p) && (value < p->min || value > p->max)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' must have %s from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT, p->name,
                    what, p->min, p->max);
        return FALSE;
    }
    return TRUE;
}

static gboolean
check_array(const Param *p, JsonNode *node, GError **error)
{
    GType want = p->type == PARAM_STRINGS ? G_TYPE_STRING : G_TYPE_INT64;
    JsonArray *arr;

    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be an array of %s",
                    p->name, p->type == PARAM_STRINGS ? "strings" : "integers");
        return FALSE;
    }
    arr = json_node_get_array(node);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        if (!carrel_conf_node_holds(json_array_get_element(arr, i), want)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "'%s' must be an array of %s", p->name,
                        p->type == PARAM_STRINGS ? "strings" : "integers");
            return FALSE;
        }
    }
    return check_range(p, json_array_get_length(arr), "a number of items", error);
}

static gboolean
check_string(const Param *p, JsonNode *node, GError **error)
{
    if (!carrel_conf_node_holds(node, G_TYPE_STRING)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be a string",
                    p->name);
        return FALSE;
    }
    if (p->choices && !g_strv_contains(p->choices, json_node_get_string(node))) {
        g_autofree char *list = g_strjoinv(", ", (char **)p->choices);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be one of: %s",
                    p->name, list);
        return FALSE;
    }
    return TRUE;
}

static gboolean
check_param(const Param *p, JsonNode *node, GError **error)
{
    switch (p->type) {
    case PARAM_STRING:
        return check_string(p, node, error);
    case PARAM_INTEGER:
        if (!carrel_conf_node_holds(node, G_TYPE_INT64)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be an integer",
                        p->name);
            return FALSE;
        }
        return check_range(p, json_node_get_int(node), "a value", error);
    case PARAM_NUMBER:
        if (!carrel_conf_node_holds(node, G_TYPE_INT64) &&
            !carrel_conf_node_holds(node, G_TYPE_DOUBLE)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be a number",
                        p->name);
            return FALSE;
        }
        return TRUE;
    case PARAM_STRINGS:
    case PARAM_INTEGERS:
        return check_array(p, node, error);
    case PARAM_BOOLEAN:
        if (!carrel_conf_node_holds(node, G_TYPE_BOOLEAN)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be a boolean",
                        p->name);
            return FALSE;
        }
        return TRUE;
    }
    g_assert_not_reached();
}

static const Param *
find_param(const Tool *tool, const char *name)
{
    for (const Param *p = tool->params; p->name; p++) {
        if (g_str_equal(p->name, name))
            return p;
    }
    return NULL;
}

JsonObject *
carrel_mcp_tool_arguments(CarrelMcpTool tool, JsonNode *arguments, GError **error)
{
    const Tool *def;
    g_autoptr(JsonObject) out = json_object_new();
    g_autoptr(GList) members = NULL;
    JsonObject *in;

    g_return_val_if_fail(tool < CARREL_MCP_TOOL_LAST, NULL);
    def = &tools[tool];
    if (arguments && !JSON_NODE_HOLDS_NULL(arguments) && !JSON_NODE_HOLDS_OBJECT(arguments)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'arguments' must be an object");
        return NULL;
    }
    in = arguments && JSON_NODE_HOLDS_OBJECT(arguments) ? json_node_get_object(arguments) : NULL;
    members = in ? json_object_get_members(in) : NULL;
    for (GList *l = members; l; l = l->next) {
        const Param *p = find_param(def, l->data);
        JsonNode *value = json_object_get_member(in, l->data);

        if (!p && !def->open) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "unknown argument '%s'",
                        (const char *)l->data);
            return NULL;
        }
        if (JSON_NODE_HOLDS_NULL(value))
            continue;
        if (p && !check_param(p, value, error))
            return NULL;
        json_object_set_member(out, l->data, json_node_copy(value));
    }
    for (const Param *p = def->params; p->name; p++) {
        if (p->required && !json_object_has_member(out, p->name)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is required", p->name);
            return NULL;
        }
    }
    return g_steal_pointer(&out);
}

CarrelExecRequest *
carrel_mcp_exec_request_from_arguments(JsonObject *args, GError **error)
{
    gboolean has_command = json_object_has_member(args, "command");
    g_autoptr(JsonObject) body = json_object_new();
    g_autoptr(JsonNode) node = NULL;
    JsonArray *argv;

    if (has_command == json_object_has_member(args, "argv")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "give either 'command' (a shell line) or 'argv', not both nor neither");
        return NULL;
    }
    if (has_command) {
        argv = json_array_new();
        json_array_add_string_element(argv, "/bin/sh");
        json_array_add_string_element(argv, "-c");
        json_array_add_string_element(argv, json_object_get_string_member(args, "command"));
        json_object_set_array_member(body, "argv", argv);
    } else {
        json_object_set_member(body, "argv", json_object_dup_member(args, "argv"));
    }
    if (json_object_has_member(args, "timeout_s"))
        json_object_set_member(body, "timeout_s", json_object_dup_member(args, "timeout_s"));
    if (json_object_has_member(args, "cwd"))
        json_object_set_member(body, "cwd", json_object_dup_member(args, "cwd"));
    node = json_node_init_object(json_node_alloc(), body);
    return carrel_exec_request_from_json(node, error);
}

static GBytes *
content_too_large(GError **error)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "'content' is larger than %d bytes",
                CARREL_LIMIT_FILE_BYTES);
    return NULL;
}

GBytes *
carrel_mcp_file_content_from_arguments(JsonObject *args, GError **error)
{
    const char *content = json_object_get_string_member(args, "content");
    const char *encoding = json_object_get_string_member_with_default(args, "encoding", "utf-8");
    g_autoptr(GString) clean = NULL;
    guchar *data;
    gsize len = strlen(content);

    if (g_str_equal(encoding, "utf-8"))
        return len > CARREL_LIMIT_FILE_BYTES ? content_too_large(error) : g_bytes_new(content, len);
    clean = g_string_sized_new(len);
    for (const char *c = content; *c; c++) {
        if (!g_ascii_isspace(*c))
            g_string_append_c(clean, *c);
    }
    if (!carrel_util_is_base64(clean->str, clean->len)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'content' is not valid base64 (standard alphabet, padded)");
        return NULL;
    }
    /* Decoded, n groups of four give at most 3n bytes: refuse before allocating. */
    if (clean->len / 4 * 3 > CARREL_LIMIT_FILE_BYTES + 2)
        return content_too_large(error);
    len = 0;
    data = clean->len ? g_base64_decode(clean->str, &len) : NULL;
    if (len > CARREL_LIMIT_FILE_BYTES) {
        g_free(data);
        return content_too_large(error);
    }
    return g_bytes_new_take(data, len);
}
