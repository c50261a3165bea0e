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
    char *sha256; /* of the disk image */
    char *format; /* "qcow2" or "raw" */
    guint64 size_bytes;
    guint64 virtual_size_bytes;
    CarrelBoot boot;
    char *dir; /* templates/<name>/<version> */
    char *disk_path;
    char *kernel_path; /* NULL unless boot == DIRECT */
    char *initrd_path;
    char *cmdline;
    char *recipe_hash; /* NULL for imported images */
    gint64 created_at;
} CarrelTemplate;

CarrelTemplate *carrel_template_new(void);
void carrel_template_free(CarrelTemplate *tmpl);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelTemplate, carrel_template_free)

/* JSON object of a template for the API; sessions_using is reported as "sessions". */
JsonNode *carrel_template_to_json(const CarrelTemplate *tmpl, guint sessions_using);

/* A request to import a disk image as a new template version (host paths). */
typedef struct {
    char *name;
    char *disk;
    char *format; /* required: never probed */
    CarrelBoot boot;
    char *kernel;
    char *initrd;
    char *cmdline;
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
    char *disk_path;   /* frozen qcow2 layer on the template image */
    guint vcpus;       /* the machine shape the memory was saved with */
    guint memory_mib;
    guint64 memory_bytes;
    gint64 created_at;
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
    char *dir;          /* sessions/<id> */
    char *overlay_path; /* sessions/<id>/disk.qcow2 */
    gboolean from_warm; /* restored from the template's warm state rather than booted */
    gint64 created_at;
    gint64 updated_at;
} CarrelSession;

CarrelSession *carrel_session_new(void);
void carrel_session_free(CarrelSession *session);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSession, carrel_session_free)

/* Libvirt domain name of a session: "carrel-<id>". */
char *carrel_session_domain_name(const char *session_id);

/* JSON object of a session for the API. */
JsonNode *carrel_session_to_json(const CarrelSession *session);

/* A request to create a session: {template, name?, vcpus?, memory_mib?, cold?}. */
typedef struct {
    char *template_name;
    guint template_version; /* 0 = latest */
    char *name;             /* NULL = derived from the id */
    guint vcpus;            /* 0 = default */
    guint memory_mib;       /* 0 = default */
    gboolean cold;          /* boot even when the template is warm */
} CarrelSessionRequest;

void carrel_session_request_free(CarrelSessionRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSessionRequest, carrel_session_request_free)

/*
 * Parses and validates a create request. "template" may be "name" or "name@version".
 * Unknown members are refused (a typo must not be silently ignored).
 */
CarrelSessionRequest *carrel_session_request_from_json(JsonNode *node, GError **error);

/* A command to run in a guest: {argv, env?, cwd?, stdin?, timeout_s?}. */
typedef struct {
    GStrv argv;
    GStrv env; /* "NAME=VALUE" entries, names checked */
    char *cwd; /* absolute, or NULL */
    GBytes *stdin_bytes;
    guint timeout_s;
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
JsonNode *carrel_exec_result_to_json(const CarrelExecResult *result);

/* Refuses members of obj outside allowed (NULL-terminated), naming the first unknown one. */
gboolean carrel_conf_check_members(JsonObject *obj, const char *const *allowed, GError **error);

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
    gint64 ts_us; /* wall clock, microseconds since the epoch */
    char *actor;  /* role of the caller ("admin", "agent", "reviewer") or "carreld" */
    char *kind;   /* "action", "command", "file", "lifecycle" */
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

/* JSON object of an event for the API. */
JsonNode *carrel_event_to_json(const CarrelEvent *event);

/* How a screenshot is returned: cropped to region first, then scaled, then encoded. */
typedef struct {
    gboolean jpeg;  /* PNG otherwise */
    guint quality;  /* JPEG quality 1..100 (default 80) */
    double scale;   /* 0.01..4, 1 = as is */
    guint max_edge; /* 0 = none; else the longer side is at most this (never enlarges) */
    gboolean has_region;
    guint region[4]; /* x, y, width, height in screen pixels */
} CarrelScreenshotRequest;

/*
 * Reads a screenshot request from URL query parameters (format=png|jpeg, quality, scale,
 * max_edge, region=x,y,w,h; query may be NULL). Unknown parameters, values out of range and
 * scale together with max_edge are INVALID_ARG.
 */
gboolean carrel_screenshot_request_parse(GHashTable *query, CarrelScreenshotRequest *ret_req,
                                         GError **error);

G_END_DECLS
