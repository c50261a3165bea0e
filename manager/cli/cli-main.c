#include "cli/cli.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define CLI_DEFAULT_SOCKET "/run/carrel/carreld.sock"
#define CLI_DEFAULT_STATE_DIR "/var/lib/carrel"
#define CLI_MAX_TOKEN_BYTES 4096

static const char cli_help[] =
    "Usage: carrel [OPTION...] COMMAND [ARG...]\n"
    "\n"
    "Manage carrel's desktop VM sessions and templates through carreld.\n"
    "\n"
    "Commands:\n"
    "  version                        versions of carrel and carreld, accelerator in use\n"
    "  template ls                    list templates (every version)\n"
    "  template show NAME[@VERSION]   show a template\n"
    "  template import NAME --disk FILE --format qcow2|raw [--firmware bios|uefi]\n"
    "                  [--kernel FILE [--initrd FILE] [--cmdline TEXT]]\n"
    "                                 import a disk image as a new template version\n"
    "  template build NAME            build a template from its recipe, showing progress\n"
    "  template pool [NAME --size N]  keep N paused sessions ready for instant creates\n"
    "  template warm NAME[@VERSION]   boot it once and save the running desktop: sessions\n"
    "                                 then restore instead of booting\n"
    "  template rm NAME[@VERSION]     delete one version, or every version (once unused)\n"
    "  create [--template] TEMPLATE [--name NAME] [--policy P] [--vcpus N] [--memory MIB]\n"
    "         [--screen WxH] [--cold]\n"
    "         [--input LOCAL:GUEST_PATH]... [--artifact GUEST_PATH]...\n"
    "         [--ttl S] [--idle S] [--on-expiry destroy|stop|hibernate|pause]\n"
    "                                 create a session and wait for its desktop; inputs are\n"
    "                                 written before boot, artifacts collected on exit\n"
    "  ls [--all]                     list sessions (--all: destroyed ones too)\n"
    "  show ID                        show a session (ID or name)\n"
    "  start ID                       start a stopped session\n"
    "  stop ID [--timeout S]          stop a session (forced off after S s, default 30)\n"
    "  pause ID | resume ID           stop / continue the vCPUs (memory stays in QEMU)\n"
    "  hibernate ID                   save the memory to disk, end QEMU; resume restores it\n"
    "  snapshot ID NAME [--delete]    snapshot disk + memory (stopped: disk only), or delete\n"
    "  snapshots ID                   list a session's snapshots\n"
    "  revert ID SNAPSHOT             back to any snapshot, any number of times\n"
    "  fork ID [--snapshot S] [--count N]\n"
    "                                 new sessions from a snapshot's memory, side by side\n"
    "  rm ID...                       destroy sessions and their disks\n"
    "  control ID take|release        hold a session's input (agents get 409) or hand it back\n"
    "  approvals [--all]              actions waiting for a reviewer\n"
    "  approve|deny AID [--reason R]  decide one (once)\n"
    "  token ls                       tokens: name, id, role, state, last use, expiry\n"
    "  token add NAME [--role R] [--expires 12h] [--policy P]...\n"
    "                                 a token for a person or agent (reviewer by default);\n"
    "                                 events and the audit log name them; shown once;\n"
    "                                 --policy limits an agent's sessions to those policies\n"
    "  token revoke NAME              refuse a token from now on\n"
    "  policy ls | show NAME          the named policies sessions are created under\n"
    "  egress ID [--after SEQ]        what a session tried to reach, and the decisions\n"
    "  token rotate-admin             a new admin token; carreld writes it to its admin.token\n"
    "  audit ls [--session S] [--principal P] [--operation O] [--result R] [--since T]\n"
    "           [--after SEQ] [--limit N]\n"
    "                                 who did what, oldest first\n"
    "  audit verify                   check the audit log's hash chain (exit 9 when broken)\n"
    "  audit export [--since T] [-o FILE]\n"
    "                                 every entry as JSON lines, for a SIEM\n"
    "  exec ID [--timeout S] [--cwd DIR] [--env K=V] -- COMMAND [ARG...]\n"
    "                                 run a command in the guest; exits with its code\n"
    "  exec ID --stream ... | --background ...\n"
    "                                 print its output as it comes | start it, print its handle\n"
    "  ps ID                          the session's background processes\n"
    "  logs ID HANDLE [--follow]      a background process's output (--follow: until it ends)\n"
    "  kill ID HANDLE [--signal SIG]  signal a background process (TERM by default)\n"
    "  stdin ID HANDLE [--close]      send our standard input to a background process\n"
    "  shell ID                       a terminal in the guest (control lease holder or admin);\n"
    "                                 exits with the shell's code\n"
    "  cp SRC DEST                    copy a file in or out: one side ID:/PATH, the other a\n"
    "                                 local file or '-' (binary-safe, streamed, up to 1 GiB)\n"
    "  fs ID ls|stat|mkdir [-p]|rm [-r]|mv PATH...\n"
    "                                 file operations in the guest (absolute paths)\n"
    "  extract ID GUEST_PATH... -o DIR [--max-mib N] [--max-files N]\n"
    "                                 take files out (running: agent; off, crashed: disk)\n"
    "  artifacts ID                   list what was extracted (asked for or on exit)\n"
    "  artifact AID -o FILE           download one extracted file\n"
    "  diff ID [--path P]             files added, changed, removed against the template\n"
    "  recording ID [NAME -o FILE]    the screen recording's segments (policy [recording]),\n"
    "                                 or download one finished segment (WebM)\n"
    "  export ID -o FILE|-            a signed evidence bundle: audit rows, timeline,\n"
    "                                 screenshots, artifacts, egress log, policy (a tar)\n"
    "  verify BUNDLE [--key KEY]      check a bundle offline (no daemon): signature, every\n"
    "                                 file, the audit chain; KEY pins the host key\n"
    "  screenshot ID -o FILE [--format png|jpeg] [--scale F | --max-edge N] [--region X,Y,W,H]\n"
    "                                 save the screen, taken by the hypervisor\n"
    "  click ID X Y [--button B] [--count N] [--modifiers ctrl+shift] [-o FILE]\n"
    "  type ID TEXT [--method M] [--paste-keys COMBO] [-o FILE]\n"
    "                                 type any Unicode text; M: auto, keys, guest_keysyms,\n"
    "                                 clipboard (prints the method used)\n"
    "  key ID COMBO... [-o FILE]      press keys xdotool style: ctrl+shift+t Return F5\n"
    "  scroll ID X Y --dy N [--dx N] [-o FILE]\n"
    "  do ID JSON|- [-o FILE]         raw action JSON (Anthropic, OpenAI, OSWorld or carrel\n"
    "                                 format, or a batch); -o saves the final screenshot\n"
    "  a11y ID [--desktop] [--depth N] [--max-nodes N]\n"
    "                                 the accessibility tree of the focused window (--desktop:\n"
    "                                 every application): ids for the click_element action\n"
    "  console ID [--vv FILE | --viewer]\n"
    "                                 the web console's URL (carreld on TCP); --vv writes a\n"
    "                                 remote-viewer file, --viewer opens remote-viewer (both\n"
    "                                 need the control lease)\n"
    "  mcp                            serve MCP (Model Context Protocol) on stdin/stdout for\n"
    "                                 local clients (Claude Desktop...): one JSON-RPC message\n"
    "                                 per line, relayed to carreld's POST /mcp\n"
    "\n"
    "Options (before or after the command):\n"
    "  --socket PATH      carreld's Unix socket (env CARREL_SOCKET,\n"
    "                     default " CLI_DEFAULT_SOCKET ")\n"
    "  --url URL          reach carreld over TCP instead: http://127.0.0.1:PORT (env CARREL_URL)\n"
    "  --token-file FILE  file holding the API token; env CARREL_TOKEN holds the token itself;\n"
    "                     default $CARREL_STATE_DIR/admin.token (" CLI_DEFAULT_STATE_DIR
    "/admin.token)\n"
    "                     when readable\n"
    "  --json             JSON only on stdout; an error is\n"
    "                     {\"error\":{\"code\",\"message\",\"hint\"}} there too (the API's\n"
    "                     codes, plus \"usage\" and \"unreachable\"); without --json an error\n"
    "                     is printed on stderr with a hint line saying what to do next;\n"
    "                     long jobs print JSON lines, the result last\n"
    "  -h, --help         this help; 'carrel COMMAND --help' shows a command's options\n"
    "\n"
    "Options win over the environment; CARREL_URL wins over CARREL_SOCKET.\n"
    "\n"
    "On a terminal, template build and warm, cp, create --input and extract show one\n"
    "progress line on stderr, rewritten in place and cleared at the end. An error is\n"
    "followed by a line 'carrel: hint: ...' saying what to do next.\n"
    "\n"
    "Exit codes:\n"
    "  0 ok                1 failed (host or other error)   2 usage\n"
    "  3 not found         4 conflict (wrong state, busy, exists, retry later)\n"
    "  5 denied (unauthorized, forbidden, policy)           6 carreld unreachable\n"
    "  7 timeout           8 invalid argument refused by carreld\n"
    "  9 audit log broken (audit verify)                    10 bundle broken (verify)\n";

typedef struct {
    const char *name;
    CarrelCliVerbFunc func;
    gboolean offline; /* needs neither carreld nor a token */
} CliVerb;

static const CliVerb cli_verbs[] = {
    {"version", carrel_cli_version},
    {"template", carrel_cli_template},
    {"create", carrel_cli_create},
    {"ls", carrel_cli_ls},
    {"show", carrel_cli_show},
    {"start", carrel_cli_start},
    {"stop", carrel_cli_stop},
    {"exec", carrel_cli_exec},
    {"ps", carrel_cli_ps},
    {"logs", carrel_cli_logs},
    {"kill", carrel_cli_kill},
    {"stdin", carrel_cli_stdin},
    {"shell", carrel_cli_shell},
    {"rm", carrel_cli_rm},
    {"cp", carrel_cli_cp},
    {"fs", carrel_cli_fs},
    {"extract", carrel_cli_extract},
    {"pause", carrel_cli_pause},
    {"resume", carrel_cli_resume},
    {"hibernate", carrel_cli_hibernate},
    {"snapshot", carrel_cli_snapshot},
    {"snapshots", carrel_cli_snapshots},
    {"revert", carrel_cli_revert},
    {"fork", carrel_cli_fork},
    {"diff", carrel_cli_diff},
    {"artifacts", carrel_cli_artifacts},
    {"artifact", carrel_cli_artifact},
    {"export", carrel_cli_export},
    {"recording", carrel_cli_recording},
    {"verify", carrel_cli_verify, TRUE},
    {"screenshot", carrel_cli_screenshot},
    {"click", carrel_cli_click},
    {"type", carrel_cli_type},
    {"key", carrel_cli_key},
    {"scroll", carrel_cli_scroll},
    {"do", carrel_cli_do},
    {"a11y", carrel_cli_a11y},
    {"mcp", carrel_cli_mcp},
    {"token", carrel_cli_token},
    {"policy", carrel_cli_policy},
    {"egress", carrel_cli_egress},
    {"audit", carrel_cli_audit},
    {"control", carrel_cli_control},
    {"approvals", carrel_cli_approvals},
    {"approve", carrel_cli_decide},
    {"deny", carrel_cli_decide},
    {"console", carrel_cli_console},
};

typedef struct {
    const char *socket_path;
    const char *url;
    const char *token_file;
    gboolean json;
    gboolean help;
    GPtrArray *args; /* the verb and its arguments: argv's strings, not owned */
} CliGlobals;

static const char *const cli_value_options[] = {"--socket", "--url", "--token-file", NULL};

/* Index in cli_value_options of arg ("--opt" or "--opt=VALUE"), or -1. */
static int
value_option_index(const char *arg)
{
    for (int i = 0; cli_value_options[i]; i++) {
        gsize len = strlen(cli_value_options[i]);

        if (strncmp(arg, cli_value_options[i], len) == 0 && (arg[len] == '\0' || arg[len] == '='))
            return i;
    }
    return -1;
}

/* Takes the global options out of argv wherever they are (up to "--"); the rest goes to args. */
static gboolean
globals_parse(CliGlobals *globals, int argc, char **argv, GError **error)
{
    const char **slots[] = {&globals->socket_path, &globals->url, &globals->token_file};
    gboolean rest = FALSE;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int opt = rest ? -1 : value_option_index(arg);
        const char *value;

        if (!rest && g_str_equal(arg, "--json")) {
            globals->json = TRUE;
        } else if (!rest && globals->args->len == 0 &&
                   (g_str_equal(arg, "-h") || g_str_equal(arg, "--help"))) {
            globals->help = TRUE;
        } else if (opt < 0) {
            rest = rest || g_str_equal(arg, "--");
            g_ptr_array_add(globals->args, argv[i]);
        } else {
            value = strchr(arg, '=');
            if (!value && i + 1 >= argc) {
                g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                            "option '%s' needs a value", arg);
                return FALSE;
            }
            *slots[opt] = value ? value + 1 : argv[++i];
        }
    }
    g_ptr_array_add(globals->args, NULL);
    return TRUE;
}

static char *
token_read_file(const char *path, GError **error)
{
    g_autoptr(GFile) file = g_file_new_for_path(path);
    g_autoptr(GFileInputStream) stream = NULL;
    g_autofree char *buffer = g_malloc0(CLI_MAX_TOKEN_BYTES + 2);
    g_autoptr(GError) local = NULL;
    gsize len = 0;

    stream = g_file_read(file, NULL, &local);
    if (!stream || !g_input_stream_read_all(G_INPUT_STREAM(stream), buffer, CLI_MAX_TOKEN_BYTES + 1,
                                            &len, NULL, &local)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "cannot read token file '%s': %s",
                    path, local->message);
        return NULL;
    }
    g_strstrip(buffer);
    if (len > CLI_MAX_TOKEN_BYTES || !*buffer || !carrel_util_is_clean_text(buffer)) {
        explicit_bzero(buffer, CLI_MAX_TOKEN_BYTES + 2);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "token file '%s' must hold one token: at most %d bytes, no control "
                    "characters",
                    path, CLI_MAX_TOKEN_BYTES);
        return NULL;
    }
    return g_steal_pointer(&buffer);
}

/*
 * --token-file, else CARREL_TOKEN, else the admin token file when readable, else none.
 * *ret_path is the file the token came from (NULL for the environment or no token): rotate-admin
 * tells whether that file now holds the new token.
 */
static gboolean
token_load(const char *token_file, char **ret_token, char **ret_path, GError **error)
{
    const char *env = g_getenv("CARREL_TOKEN");
    const char *state_dir = g_getenv("CARREL_STATE_DIR");
    g_autofree char *path = NULL;
    char *token = NULL;

    if (token_file) {
        token = token_read_file(token_file, error);
        if (!token)
            return FALSE;
        path = g_strdup(token_file);
    } else if (env && *env) {
        token = g_strstrip(g_strdup(env));
    } else {
        path = g_build_filename(state_dir && *state_dir ? state_dir : CLI_DEFAULT_STATE_DIR,
                                "admin.token", NULL);
        if (g_access(path, R_OK) == 0)
            token = token_read_file(path, NULL);
        if (!token)
            g_clear_pointer(&path, g_free);
    }
    *ret_token = token;
    *ret_path = g_steal_pointer(&path);
    return TRUE;
}

/* The client; cli->token_file points into *token_path, which the caller frees after the verb. */
static CarrelClient *
client_open(CarrelCli *cli, const CliGlobals *globals, char **token_path, int *ret_exit)
{
    const char *env_url = g_getenv("CARREL_URL");
    const char *env_socket = g_getenv("CARREL_SOCKET");
    const char *url = globals->url;
    const char *socket_path = globals->socket_path;
    g_autofree char *token = NULL;
    g_autoptr(GError) error = NULL;
    CarrelClient *client;

    if (url && socket_path) {
        *ret_exit = carrel_cli_usage(cli, "use either --socket or --url, not both");
        return NULL;
    }
    if (!url && !socket_path) {
        url = env_url && *env_url ? env_url : NULL;
        socket_path = !url && env_socket && *env_socket ? env_socket : CLI_DEFAULT_SOCKET;
    }
    if (!token_load(globals->token_file, &token, token_path, &error)) {
        *ret_exit = carrel_cli_fail_hint(
            cli, error, "run as root, or pass --token-file FILE naming a file you can read");
        return NULL;
    }
    cli->has_token = token != NULL;
    cli->token_file = *token_path;
    cli->url = url;
    client = carrel_client_new(url ? NULL : socket_path, url, token, 0, &error);
    if (token)
        explicit_bzero(token, strlen(token));
    if (!client)
        *ret_exit = carrel_cli_usage(cli, "%s", error->message);
    return client;
}

static const CliVerb *
verb_find(const char *name)
{
    for (gsize i = 0; i < G_N_ELEMENTS(cli_verbs); i++) {
        if (g_str_equal(cli_verbs[i].name, name))
            return &cli_verbs[i];
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    g_autoptr(CarrelClient) client = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *token_path = NULL;
    CliGlobals globals = {.args = args};
    CarrelCli cli = {0};
    const CliVerb *verb;
    const char *name;
    int exit_code = CARREL_CLI_EXIT_OK;

    setlocale(LC_ALL, "");
    g_set_prgname("carrel");
    cli.stdout_tty = isatty(STDOUT_FILENO);
    cli.stderr_tty = isatty(STDERR_FILENO);
    if (!globals_parse(&globals, argc, argv, &error)) {
        cli.json = globals.json;
        return carrel_cli_usage(&cli, "%s", error->message);
    }
    cli.json = globals.json;
    name = args->len > 1 ? g_ptr_array_index(args, 0) : NULL;
    if (globals.help || (name && g_str_equal(name, "help"))) {
        fputs(cli_help, stdout);
        return CARREL_CLI_EXIT_OK;
    }
    if (!name)
        return carrel_cli_usage(&cli, "a command is required (see 'carrel --help')");
    if (name[0] == '-')
        return carrel_cli_usage(&cli, "unknown option '%s' (see 'carrel --help')", name);
    verb = verb_find(name);
    if (!verb)
        return carrel_cli_usage(&cli, "unknown command '%s' (see 'carrel --help')", name);
    /* An auditor checks a bundle anywhere: no token file is read, no carreld is needed. */
    if (verb->offline)
        return verb->func(&cli, (int)args->len - 1, (char **)args->pdata);
    client = client_open(&cli, &globals, &token_path, &exit_code);
    if (!client)
        return exit_code;
    cli.client = client;
    return verb->func(&cli, (int)args->len - 1, (char **)args->pdata);
}
