/* A run's work arrays (Work) and its snapshots (Snapshot), declared in simcore.h. */
#include "simcore.h"

void work_free(Work *w) {
    free(w->pending);
    free(w->earliest);
    free(w->held);
    free(w->left);
    free(w->released);
    free(w->next_phase);
    free(w->coll_of);
    free(w->table_of);
    free(w->busy);
    free(w->arrivals);
    free(w->freed);
    free(w->ended);
    free(w->start_seq);
    free(w->compute_ready);
    free(w->running);
    free(w->fifo);
    free(w->fifo_len);
    if (w->queues)
        for (int d = 0; d < w->num_dims; d++) {
            free(w->queues[d].keys);
            free(w->queues[d].items);
        }
    free(w->queues);
    free(w->entry_dim);
    free(w->load);
    free(w->unstarted);
    free(w->events.data);
    free(w->rel);
    memset(w, 0, sizeof(Work));
}

/* 0, or -2 when out of memory (w is then freed) */
int work_alloc(Work *w, int num_tasks, int num_colls, int num_chunks, int num_computes, int num_dims) {
    memset(w, 0, sizeof(Work));
    w->num_tasks = num_tasks;
    w->num_colls = num_colls;
    w->num_chunks = num_chunks;
    w->num_computes = num_computes;
    w->num_dims = num_dims;
    size_t tasks = (size_t)num_tasks + 1, colls = (size_t)num_colls + 1, n = (size_t)num_chunks + 1,
           dims = (size_t)num_dims + 1;
    w->pending = malloc(sizeof(int) * tasks);
    w->earliest = malloc(sizeof(double) * tasks);
    w->held = malloc(tasks);
    w->left = malloc(sizeof(int) * colls);
    w->released = malloc(colls);
    w->next_phase = malloc(sizeof(int) * n);
    w->coll_of = malloc(sizeof(int) * n);
    w->table_of = malloc(sizeof(int) * n);
    w->busy = malloc(sizeof(int) * dims);
    w->arrivals = malloc(sizeof(int) * n);
    w->freed = malloc(sizeof(int) * 2 * n);
    w->ended = malloc(sizeof(int) * n);
    w->start_seq = malloc(sizeof(int64_t) * n);
    w->compute_ready = malloc(sizeof(int) * ((size_t)num_computes + 1));
    w->running = malloc(n);
    w->fifo = malloc(sizeof(FifoEntry) * dims * n);
    w->fifo_len = malloc(sizeof(int64_t) * dims);
    w->queues = calloc(dims, sizeof(Scf));
    w->entry_dim = malloc(sizeof(int) * dims);
    w->load = malloc(sizeof(double) * dims);
    w->unstarted = malloc(sizeof(double) * dims);
    w->rel = malloc(sizeof(double) * tasks);
    w->events.cap = (int64_t)tasks + (int64_t)n + 1; /* a release per task, a phase per chunk, a compute task */
    w->events.data = malloc(sizeof(Event) * (size_t)w->events.cap);
    int ok = w->pending && w->earliest && w->held && w->left && w->released && w->next_phase && w->coll_of &&
             w->table_of && w->busy && w->arrivals && w->freed && w->ended && w->start_seq && w->compute_ready &&
             w->running && w->fifo &&
             w->fifo_len && w->queues && w->entry_dim && w->load && w->unstarted && w->rel && w->events.data;
    for (int d = 0; ok && d < num_dims; d++) {
        int64_t cap = 2 * (int64_t)num_chunks + 2;
        w->queues[d].cap = cap;
        w->queues[d].keys = malloc(sizeof(double) * (size_t)cap);
        w->queues[d].items = malloc(sizeof(int) * (size_t)cap);
        ok = w->queues[d].keys && w->queues[d].items;
    }
    if (!ok) {
        work_free(w);
        return -2;
    }
    return 0;
}

void snapshot_free(Snapshot *s) {
    if (!s) return;
    free(s->events);
    free(s->rel);
    free(s->pending);
    free(s->earliest);
    free(s->held);
    free(s->released);
    free(s->left);
    free(s->next_phase);
    free(s->table_of);
    free(s->start_seq);
    free(s->busy);
    free(s->compute_ready);
    free(s->queue_len);
    free(s->fifo);
    free(s->keys);
    free(s->items);
    free(s);
}

Snapshot *snapshot_new(const Work *w) {
    Snapshot *s = calloc(1, sizeof(Snapshot));
    if (!s) return NULL;
    size_t tasks = (size_t)w->num_tasks + 1, colls = (size_t)w->num_colls + 1, n = (size_t)w->num_chunks + 1,
           dims = (size_t)w->num_dims + 1;
    s->events = malloc(sizeof(Event) * (tasks + n + 1));
    s->rel = malloc(sizeof(double) * tasks);
    s->pending = malloc(sizeof(int) * tasks);
    s->earliest = malloc(sizeof(double) * tasks);
    s->held = malloc(tasks);
    s->released = malloc(colls);
    s->left = malloc(sizeof(int) * colls);
    s->next_phase = malloc(sizeof(int) * n);
    s->table_of = malloc(sizeof(int) * n);
    s->start_seq = malloc(sizeof(int64_t) * n);
    s->busy = malloc(sizeof(int) * dims);
    s->compute_ready = malloc(sizeof(int) * ((size_t)w->num_computes + 1));
    s->queue_len = malloc(sizeof(int64_t) * dims);
    s->fifo = malloc(sizeof(FifoEntry) * n);
    s->keys = malloc(sizeof(double) * n);
    s->items = malloc(sizeof(int) * n);
    if (!s->events || !s->rel || !s->pending || !s->earliest || !s->held || !s->released || !s->left ||
        !s->next_phase || !s->table_of || !s->start_seq || !s->busy || !s->compute_ready || !s->queue_len || !s->fifo || !s->keys ||
        !s->items) {
        snapshot_free(s);
        return NULL;
    }
    return s;
}

/* take: w's state into s; else s's into w (the same fields both ways) */
void snapshot_copy(Snapshot *s, Work *w, Scalars *v, int policy, int take) {
#define COPY(kept, live, bytes) (take ? memcpy((kept), (live), (bytes)) : memcpy((live), (kept), (bytes)))
#define FIELD(kept, live) do { if (take) (kept) = (live); else (live) = (kept); } while (0)
    size_t tasks = (size_t)w->num_tasks, colls = (size_t)w->num_colls, n = (size_t)w->num_chunks;
    FIELD(s->events_len, w->events.len);
    FIELD(s->rel_len, w->rel_len);
    FIELD(s->num_ready, v->num_ready);
    FIELD(s->seq, v->seq);
    FIELD(s->handled, v->handled);
    FIELD(s->starts, v->starts);
    FIELD(s->compute_busy, v->compute_busy);
    FIELD(s->waited, v->waited);
    COPY(s->events, w->events.data, sizeof(Event) * (size_t)s->events_len);
    COPY(s->rel, w->rel, sizeof(double) * (size_t)s->rel_len);
    COPY(s->pending, w->pending, sizeof(int) * tasks);
    COPY(s->earliest, w->earliest, sizeof(double) * tasks);
    COPY(s->held, w->held, tasks);
    COPY(s->released, w->released, colls);
    COPY(s->left, w->left, sizeof(int) * colls);
    COPY(s->next_phase, w->next_phase, sizeof(int) * n);
    COPY(s->table_of, w->table_of, sizeof(int) * n);
    COPY(s->start_seq, w->start_seq, sizeof(int64_t) * n);
    COPY(s->busy, w->busy, sizeof(int) * (size_t)w->num_dims);
    COPY(s->compute_ready, w->compute_ready, sizeof(int) * (size_t)s->num_ready);
    int64_t at = 0;
    for (int d = 0; d < w->num_dims; d++) {
        if (policy != SCF) {
            FIELD(s->queue_len[d], w->fifo_len[d]);
            COPY(s->fifo + at, w->fifo + (size_t)d * (n + 1), sizeof(FifoEntry) * (size_t)s->queue_len[d]);
        } else {
            Scf *q = &w->queues[d];
            if (take) {
                s->queue_len[d] = q->len;
            } else { /* where a sequence sits in its buffer changes no rule */
                q->len = s->queue_len[d];
                q->head = (q->cap - q->len) / 2;
            }
            COPY(s->keys + at, q->keys + q->head, sizeof(double) * (size_t)q->len);
            COPY(s->items + at, q->items + q->head, sizeof(int) * (size_t)q->len);
        }
        at += s->queue_len[d];
    }
#undef COPY
#undef FIELD
}
