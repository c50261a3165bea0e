#include "core/core-priv.h"

#define JOB_PROGRESS_LINES 200
#define JOB_LINE_MAX 400
#define JOB_TABLE_MAX 64

typedef enum { JOB_RUNNING, JOB_SUCCEEDED, JOB_FAILED } JobState;

struct _CarrelJob {
    gatomicrefcount ref;
    char *id;
    char *kind;
    char *target;
    gint64 created_at;
    GMutex lock;
    GCond done_cond;
    JobState state;
    GQueue progress; /* of char*, the last JOB_PROGRESS_LINES lines */
    guint64 progress_total;
    JsonNode *result;
    GError *error;
    CarrelJobFunc func;
    gpointer data;
    GDestroyNotify free_data;
};

CarrelJob *
carrel_job_new(const char *kind, const char *target)
{
    CarrelJob *job = g_new0(CarrelJob, 1);

    g_atomic_ref_count_init(&job->ref);
    job->id = carrel_util_new_id("j-");
    job->kind = g_strdup(kind);
    job->target = g_strdup(target);
    job->created_at = carrel_util_now();
    g_mutex_init(&job->lock);
    g_cond_init(&job->done_cond);
    g_queue_init(&job->progress);
    return job;
}

CarrelJob *
carrel_job_ref(CarrelJob *job)
{
    g_atomic_ref_count_inc(&job->ref);
    return job;
}

void
carrel_job_unref(CarrelJob *job)
{
    if (!job || !g_atomic_ref_count_dec(&job->ref))
        return;
    g_queue_clear_full(&job->progress, g_free);
    g_clear_pointer(&job->result, json_node_unref);
    g_clear_error(&job->error);
    if (job->free_data)
        job->free_data(job->data);
    g_mutex_clear(&job->lock);
    g_cond_clear(&job->done_cond);
    g_free(job->id);
    g_free(job->kind);
    g_free(job->target);
    g_free(job);
}

const char *
carrel_job_get_id(CarrelJob *job)
{
    return job->id;
}

void
carrel_job_progress(CarrelJob *job, const char *line)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&job->lock);
    g_autofree char *clean = g_utf8_make_valid(line, -1);

    /* Progress comes from recipe scripts: keep it printable and bounded. */
    for (char *p = clean; *p; p++) {
        if ((guchar)*p < 0x20)
            *p = ' ';
    }
    if (g_utf8_strlen(clean, -1) > JOB_LINE_MAX)
        *g_utf8_offset_to_pointer(clean, JOB_LINE_MAX) = '\0';
    g_queue_push_tail(&job->progress, g_steal_pointer(&clean));
    job->progress_total++;
    while (g_queue_get_length(&job->progress) > JOB_PROGRESS_LINES)
        g_free(g_queue_pop_head(&job->progress));
}

static gpointer
job_thread(gpointer data)
{
    CarrelJob *job = data;
    JsonNode *result = NULL;
    GError *error = NULL;
    gboolean ok = job->func(job, job->data, &result, &error);

    g_mutex_lock(&job->lock);
    job->state = ok ? JOB_SUCCEEDED : JOB_FAILED;
    job->result = result;
    job->error = error;
    g_cond_broadcast(&job->done_cond);
    g_mutex_unlock(&job->lock);
    carrel_job_unref(job);
    return NULL;
}

void
carrel_job_run(CarrelJob *job, CarrelJobFunc func, gpointer data, GDestroyNotify free_data)
{
    job->func = func;
    job->data = data;
    job->free_data = free_data;
    g_thread_unref(g_thread_new("carrel-job", job_thread, carrel_job_ref(job)));
}

gboolean
carrel_job_wait(CarrelJob *job, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&job->lock);

    while (job->state == JOB_RUNNING)
        g_cond_wait(&job->done_cond, &job->lock);
    if (job->state == JOB_FAILED) {
        g_propagate_error(error, g_error_copy(job->error));
        return FALSE;
    }
    return TRUE;
}

static const char *
job_state_name(JobState state)
{
    switch (state) {
    case JOB_RUNNING:
        return "running";
    case JOB_SUCCEEDED:
        return "succeeded";
    case JOB_FAILED:
        return "failed";
    }
    return "unknown";
}

static void
add_error(JsonBuilder *b, const GError *error)
{
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "code");
    json_builder_add_string_value(
        b, error->domain == CARREL_ERROR ? carrel_error_code_to_string(error->code) : "failed");
    json_builder_set_member_name(b, "message");
    json_builder_add_string_value(b, error->message);
    json_builder_end_object(b);
}

JsonNode *
carrel_job_to_json(CarrelJob *job)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&job->lock);
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *created = carrel_util_format_time(job->created_at);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, job->id);
    json_builder_set_member_name(b, "kind");
    json_builder_add_string_value(b, job->kind);
    json_builder_set_member_name(b, "target");
    json_builder_add_string_value(b, job->target);
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, job_state_name(job->state));
    json_builder_set_member_name(b, "progress");
    json_builder_begin_array(b);
    for (GList *l = job->progress.head; l; l = l->next)
        json_builder_add_string_value(b, l->data);
    json_builder_end_array(b);
    /* Lets a poller print only lines it has not seen, even after old ones were dropped. */
    json_builder_set_member_name(b, "progress_total");
    json_builder_add_int_value(b, (gint64)job->progress_total);
    json_builder_set_member_name(b, "error");
    if (job->error)
        add_error(b, job->error);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "result");
    if (job->result)
        json_builder_add_value(b, json_node_copy(job->result));
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "created_at");
    json_builder_add_string_value(b, created);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

CarrelJob *
carrel_manager_job_get(CarrelManager *mgr, const CarrelPrincipal *who, const char *id,
                       GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GMutexLocker) locker = NULL;
    CarrelJob *job;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_JOB_READ, NULL, NULL, error))
        return NULL;
    locker = g_mutex_locker_new(&mgr->lock);
    job = g_hash_table_lookup(mgr->jobs, id);

    if (!job) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "job '%s' does not exist", id);
        return NULL;
    }
    return carrel_job_ref(job);
}

static gboolean
job_done(CarrelJob *job)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&job->lock);

    return job->state != JOB_RUNNING;
}

static gboolean
forget_if_done(gpointer key, gpointer value, gpointer user_data)
{
    return job_done(value);
}

void
carrel_manager_add_job(CarrelManager *mgr, CarrelJob *job)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);

    /* Finished jobs are kept for pollers, but not without bound. */
    if (g_hash_table_size(mgr->jobs) >= JOB_TABLE_MAX)
        g_hash_table_foreach_remove(mgr->jobs, forget_if_done, NULL);
    g_hash_table_insert(mgr->jobs, (gpointer)carrel_job_get_id(job), carrel_job_ref(job));
}

guint
carrel_manager_jobs_running(CarrelManager *mgr)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);
    GHashTableIter iter;
    gpointer value;
    guint running = 0;

    g_hash_table_iter_init(&iter, mgr->jobs);
    while (g_hash_table_iter_next(&iter, NULL, &value))
        running += job_done(value) ? 0 : 1;
    return running;
}
