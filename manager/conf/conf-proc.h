/*
 * conf: background processes in a guest (carrel-guest proc): their records, the parsers of the
 * guest's replies (untrusted: every member is checked and bounded) and the bodies of the
 * process routes (included by conf.h).
 */
#pragma once

#ifndef CARREL_CONF_H_INSIDE
#error "include conf/conf.h, not conf-proc.h"
#endif

G_BEGIN_DECLS

/* Handles the guest may list (its own bound is 32). */
#define CARREL_PROC_LIST_MAX 64
/* Decoded bytes of each stream one read may carry (the guest sends at most 48 KiB). */
#define CARREL_PROC_CHUNK_MAX (64 * 1024)
/* What the guest lets a stream grow to (its RLIMIT_FSIZE); a size beyond is a lie. */
#define CARREL_PROC_OUTPUT_MAX (64 * 1024 * 1024)
/* Bytes one stdin write takes. */
#define CARREL_PROC_INPUT_MAX (256 * 1024)

/* TRUE for a handle carrel-guest makes: "p" and 1 to 16 lowercase hex digits. */
gboolean carrel_proc_handle_valid(const char *handle);

/* One process as "proc list" tells it. */
typedef struct {
    char *handle;
    GStrv argv;         /* as the guest tells it: clean text, at most 32 entries */
    gint64 pid;         /* -1: unknown */
    gboolean exited;    /* else running */
    int exit_code;      /* when exited: its status, or 128 + the signal */
    gint64 started_at;  /* unix seconds; 0: unknown */
    gint64 stdout_size; /* bytes written so far */
    gint64 stderr_size;
} CarrelProcInfo;

void carrel_proc_info_free(CarrelProcInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelProcInfo, carrel_proc_info_free)

/* {"processes":[...]} from the guest: CarrelProcInfo items (HYPERVISOR on anything malformed). */
GPtrArray *carrel_proc_list_from_guest(JsonNode *node, GError **error);
/* The API's item: handle, argv, pid, state, exit_code, started_at, stdout_bytes, stderr_bytes. */
JsonNode *carrel_proc_info_to_json(const CarrelProcInfo *info);

/* One "proc read": the state, then the bytes from the offsets asked. */
typedef struct {
    char *handle;
    gint64 pid;
    gboolean exited;
    int exit_code;
    gint64 stdout_offset; /* where data starts */
    GBytes *stdout_data;  /* never NULL */
    gint64 stdout_size;   /* the stream's whole size now */
    gint64 stderr_offset;
    GBytes *stderr_data;
    gint64 stderr_size;
} CarrelProcRead;

void carrel_proc_read_free(CarrelProcRead *read);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelProcRead, carrel_proc_read_free)

/* A "proc read" reply for a read from these offsets: the offsets must be the ones asked, the
 * data base64 of at most CARREL_PROC_CHUNK_MAX bytes, offset + length within the size, and the
 * size within CARREL_PROC_OUTPUT_MAX (HYPERVISOR otherwise). */
CarrelProcRead *carrel_proc_read_from_guest(JsonNode *node, gint64 stdout_offset,
                                            gint64 stderr_offset, GError **error);
/* TRUE when the process has exited and both streams were read to their end. */
gboolean carrel_proc_read_is_last(const CarrelProcRead *read);
/* The API's reply: handle, pid, state, exit_code, and per stream its text (valid UTF-8), its
 * bytes in base64, the offset to read from next and its size. */
JsonNode *carrel_proc_read_to_json(const CarrelProcRead *read);

/* POST .../processes/{handle}/stdin: {data? | data_base64?, close?}. */
typedef struct {
    GBytes *data; /* NULL: nothing to write */
    gboolean close;
} CarrelProcInput;

void carrel_proc_input_free(CarrelProcInput *input);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelProcInput, carrel_proc_input_free)
CarrelProcInput *carrel_proc_input_from_json(JsonNode *node, GError **error);

/* POST .../processes/{handle}/kill: {signal?}: a name (TERM, KILL, INT, HUP, QUIT, USR1, USR2,
 * STOP, CONT; "SIG" may lead) or a number 1..64; TERM when absent. */
typedef struct {
    int signal;
} CarrelProcSignal;

void carrel_proc_signal_free(CarrelProcSignal *sig);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelProcSignal, carrel_proc_signal_free)
CarrelProcSignal *carrel_proc_signal_from_json(JsonNode *node, GError **error);
/* A signal name or number as above; -1 when it is neither. */
int carrel_proc_signal_parse(const char *text);

/* A terminal's rows and columns at most (the shell's websocket, carrel-guest's own bound). */
#define CARREL_SHELL_SIZE_MAX 1000

/* A control message of the shell's websocket (a text frame): {"type":"resize","rows":R,
 * "cols":C} (each 1..CARREL_SHELL_SIZE_MAX) or {"type":"eof"}; nothing else. */
typedef struct {
    gboolean eof; /* else a resize */
    guint rows, cols;
} CarrelShellControl;

void carrel_shell_control_free(CarrelShellControl *control);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelShellControl, carrel_shell_control_free)
CarrelShellControl *carrel_shell_control_from_json(JsonNode *node, GError **error);

G_END_DECLS
