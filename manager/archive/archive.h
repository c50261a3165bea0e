/*
 * archive: the one place where carrel turns tar streams into files and back (libarchive for the
 * format, carrel's safety rules on top). Tar streams come from untrusted guests (artifacts) and
 * from users (task inputs); nothing they name is followed or created outside the target.
 */
#pragma once

#include "util/util.h"

G_BEGIN_DECLS

typedef enum {
    CARREL_ARCHIVE_TYPE_FILE,
    CARREL_ARCHIVE_TYPE_DIR,
    CARREL_ARCHIVE_TYPE_SYMLINK,
    CARREL_ARCHIVE_TYPE_HARDLINK,
    CARREL_ARCHIVE_TYPE_OTHER, /* device, fifo, socket */
    CARREL_ARCHIVE_TYPE_LAST
} CarrelArchiveType;

/* Wire names: "file", "dir", "symlink", "hardlink", "other". */
const char *carrel_archive_type_to_string(CarrelArchiveType type);
CarrelArchiveType carrel_archive_type_from_string(const char *name);

/* One member of a manifest, in the order it was seen. */
typedef struct {
    /* Absolute sanitized guest path ("/home/user/out/a.txt"). For a member whose name was
     * refused, the name as given, escaped to clean text (then path is NULL and skipped says
     * why). */
    char *guest_path;
    /* Where it is under DIR, relative ("home/user/out/a.txt", "." for DIR itself); NULL if not
     * written. */
    char *path;
    CarrelArchiveType type;
    guint64 size; /* bytes written for regular files, 0 otherwise */
    guint32 mode; /* permission bits (07777) as the source gave them */
    gint64 uid;
    gint64 gid;
    gint64 mtime;
    char *sha256;      /* hex, for regular files written; NULL otherwise */
    char *link_target; /* symlinks and hard links: the target as clean text, never created */
    char *skipped;     /* why the entry was recorded but not written, else NULL */
} CarrelArchiveEntry;

void carrel_archive_entry_free(CarrelArchiveEntry *entry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelArchiveEntry, carrel_archive_entry_free)

/* Defaults for a zero field of CarrelArchiveLimits (or NULL limits). */
#define CARREL_ARCHIVE_DEFAULT_MAX_BYTES (G_GUINT64_CONSTANT(1024) * 1024 * 1024)
#define CARREL_ARCHIVE_DEFAULT_MAX_ENTRIES 100000

/* Bounds on one sink or writer: max_bytes over the sum of regular file sizes, max_entries over
 * all entries (skipped ones included). Exceeding either is a CARREL_ERROR_LIMIT. */
typedef struct {
    guint64 max_bytes;
    guint max_entries;
} CarrelArchiveLimits;

/*
 * The path rules, for tests and the fuzzer as well: a member name (relative or absolute,
 * untrusted) joined onto an absolute guest prefix gives a sanitized absolute guest path. Leading
 * "/" and "./", "." segments and repeated slashes are dropped; "..", control characters, invalid
 * UTF-8, empty names, segments over 255 bytes and results over CARREL_LIMIT_GUEST_PATH bytes are
 * INVALID_ARG, with the name escaped in the message. The prefix follows the same rules.
 */
char *carrel_archive_guest_path(const char *prefix, const char *member, GError **error);

/*
 * Sink: writes extracted entries under DIR, an existing directory opened once (O_DIRECTORY |
 * O_NOFOLLOW). Every write walks DIR one component at a time relative to directory fds, so no
 * symlink can redirect it; symlinks, hard links, devices, FIFOs and sockets are only recorded.
 * Files are created 0600 then set to mode & 0777, directories stay 0700 (the manifest keeps the
 * guest's modes), nothing is chowned. An entry that cannot be written safely (refused name,
 * duplicate, parent not a directory, path taken) is recorded with a reason in `skipped`, so one
 * hostile member does not lose the rest. After an error (limit, broken tar, I/O), what was
 * recorded and written so far stays; a partly written file is removed.
 */
typedef struct _CarrelArchiveSink CarrelArchiveSink;

CarrelArchiveSink *carrel_archive_sink_new(const char *dir, const CarrelArchiveLimits *limits,
                                           GError **error);
void carrel_archive_sink_free(CarrelArchiveSink *sink);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelArchiveSink, carrel_archive_sink_free)

/*
 * Reads an uncompressed tar file (untrusted: ustar, pax, GNU or v7). Member names are relative
 * to guest_prefix, an absolute guest directory: "./a/b" with prefix "/home/user/out" is guest
 * path /home/user/out/a/b, written at DIR/home/user/out/a/b. Errors name the member, not
 * tar_path: that is usually the daemon's own file, and the caller adds what its clients may see.
 */
gboolean carrel_archive_sink_add_tar(CarrelArchiveSink *sink, const char *tar_path,
                                     const char *guest_prefix, GError **error);

/* One regular file whose bytes are in a host file (e.g. a libguestfs download): copied without
 * following a symlink at src_path, hashed, counted against the limits. */
gboolean carrel_archive_sink_add_file(CarrelArchiveSink *sink, const char *guest_path,
                                      const char *src_path, guint32 mode, gint64 uid, gint64 gid,
                                      gint64 mtime, GError **error);

/* A record only (a symlink seen by lstat, a device...); a DIR record also creates the
 * directory. link_target may be NULL. */
gboolean carrel_archive_sink_add_record(CarrelArchiveSink *sink, const char *guest_path,
                                        CarrelArchiveType type, const char *link_target,
                                        guint32 mode, gint64 uid, gint64 gid, gint64 mtime,
                                        GError **error);

/*
 * The decision made before anything leaves a guest's disk: may files of size bytes in all
 * (apparent sizes, as the guest's disk states them: a sparse file counts whole) and entries
 * entries more, found at guest_path, still go into a sink that holds used_bytes and used_entries
 * under limits (zero fields: the defaults)? LIMIT otherwise, with a message that names
 * guest_path, its size and what was left. Pure.
 */
gboolean carrel_archive_admit(const CarrelArchiveLimits *limits, guint64 used_bytes,
                              guint used_entries, const char *guest_path, guint64 size,
                              guint entries, GError **error);
/* The same against what sink holds so far. */
gboolean carrel_archive_sink_admit(CarrelArchiveSink *sink, const char *guest_path, guint64 size,
                                   guint entries, GError **error);

/* The manifest so far: CarrelArchiveEntry records in order, owned by the sink. */
GPtrArray *carrel_archive_sink_entries(CarrelArchiveSink *sink);

/* Bytes of regular file data written so far. */
guint64 carrel_archive_sink_bytes(CarrelArchiveSink *sink);

/*
 * Writer: builds a tar (pax where needed, plain ustar otherwise) for task inputs, extracted later
 * at "/" in the guest by GNU tar as root. Member names are guest paths without the leading "/";
 * uname and gname are empty so GNU tar applies the numeric uid and gid. Modes keep the bits 0777
 * only (never setuid, setgid, sticky). A second file, symlink or other entry at one path is
 * EXISTS; a member below a file or symlink of the same tar is INVALID_ARG. Missing parent
 * directories are not added: GNU tar creates them as root with default modes.
 */
typedef struct _CarrelArchiveWriter CarrelArchiveWriter;

/* Creates out_path (0600, replacing a regular file, never following a symlink). */
CarrelArchiveWriter *carrel_archive_writer_new(const char *out_path,
                                               const CarrelArchiveLimits *limits, GError **error);
/* Frees; unless finished, the partial output file is removed. */
void carrel_archive_writer_free(CarrelArchiveWriter *writer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelArchiveWriter, carrel_archive_writer_free)

/*
 * A local file or directory tree (recursive) at guest_path. Symlinks are stored as symlinks,
 * never followed; devices, FIFOs and sockets are refused (UNSUPPORTED), so are local names
 * that break the member rules (INVALID_ARG). Modes and mtimes are kept; uid/gid -1 keep the
 * local file's owner. On an error the entries added before it stay in the tar.
 */
gboolean carrel_archive_writer_add_local(CarrelArchiveWriter *writer, const char *local_path,
                                         const char *guest_path, gint64 uid, gint64 gid,
                                         GError **error);

/* A regular file with the given contents (uid and gid must be given, not -1). */
gboolean carrel_archive_writer_add_bytes(CarrelArchiveWriter *writer, const char *guest_path,
                                         const guint8 *data, gsize len, guint32 mode, gint64 uid,
                                         gint64 gid, GError **error);

/*
 * An untrusted uploaded tar re-written clean under guest_dir: names sanitized, owners forced to
 * uid/gid, limits applied. Only files, directories and symlinks are kept, and a symlink only
 * when its target is relative without a ".." segment (so it can only point down, inside
 * guest_dir). Anything else (refused name, other symlink, hard link, device, FIFO, socket) fails
 * the call with an error naming the member: an upload is an explicit input, and the task must
 * not run on less than what was asked.
 */
gboolean carrel_archive_writer_add_tar(CarrelArchiveWriter *writer, const char *tar_path,
                                       const char *guest_dir, gint64 uid, gint64 gid,
                                       GError **error);

/* Writes the end of the archive and closes the file. */
gboolean carrel_archive_writer_finish(CarrelArchiveWriter *writer, GError **error);

G_END_DECLS
