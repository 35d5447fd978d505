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
    free(w->lane0);
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
    free(w->fifo_at);
    free(w->compute_at);
    free(w->num_ready);
    if (w->queues)
        for (int d = 0; d < w->num_lanes; d++) {
            free(w->queues[d].keys);
            free(w->queues[d].items);
        }
    free(w->queues);
    free(w->compute_busy);
    free(w->waited);
    free(w->plan_reset);
    free(w->entry_dim);
    free(w->load);
    free(w->unstarted);
    free(w->plan_reset_at);
    free(w->events.data);
    free(w->rel);
    memset(w, 0, sizeof(Work));
}

/* 0, or -2 when out of memory (w is then freed) */
int work_alloc(Work *w, const Model *m) {
    memset(w, 0, sizeof(Work));
    int num_colls = m->num_colls, num_stages = m->num_stages > 0 ? m->num_stages : 1;
    int num_chunks = num_colls ? m->first_chunk[num_colls - 1] + m->chunks[num_colls - 1] : 0;
    w->num_tasks = m->num_tasks;
    w->num_colls = num_colls;
    w->num_chunks = num_chunks;
    w->num_computes = m->num_computes;
    w->num_dims = m->num_dims;
    w->num_stages = num_stages;
    w->num_lanes = num_stages * m->num_dims;
    size_t tasks = (size_t)m->num_tasks + 1, colls = (size_t)num_colls + 1, n = (size_t)num_chunks + 1,
           lanes = (size_t)w->num_lanes + 1, stages = (size_t)num_stages + 1;
    w->pending = malloc(sizeof(int) * tasks);
    w->earliest = malloc(sizeof(double) * tasks);
    w->held = malloc(tasks);
    w->left = malloc(sizeof(int) * colls);
    w->released = malloc(colls);
    w->next_phase = malloc(sizeof(int) * n);
    w->coll_of = malloc(sizeof(int) * n);
    w->lane0 = malloc(sizeof(int) * n);
    w->table_of = malloc(sizeof(int) * n);
    w->busy = malloc(sizeof(int) * lanes);
    w->arrivals = malloc(sizeof(int) * n);
    w->freed = malloc(sizeof(int) * 2 * n);
    w->ended = malloc(sizeof(int) * n);
    w->start_seq = malloc(sizeof(int64_t) * n);
    w->compute_ready = malloc(sizeof(int) * ((size_t)m->num_computes + 1));
    w->running = malloc(n);
    w->fifo_len = malloc(sizeof(int64_t) * lanes);
    w->fifo_at = calloc(lanes, sizeof(int64_t));
    w->compute_at = calloc(stages, sizeof(int64_t));
    w->num_ready = malloc(sizeof(int64_t) * stages);
    w->queues = calloc(lanes, sizeof(Scf));
    w->compute_busy = malloc(stages);
    w->waited = malloc(stages);
    w->plan_reset = malloc(stages);
    w->entry_dim = malloc(sizeof(int) * lanes);
    w->load = malloc(sizeof(double) * lanes);
    w->unstarted = malloc(sizeof(double) * lanes);
    w->plan_reset_at = malloc(sizeof(double) * stages);
    w->rel = malloc(sizeof(double) * tasks);
    w->events.cap = (int64_t)tasks + (int64_t)n + 1; /* a release per task, a phase per chunk, a compute task */
    w->events.data = malloc(sizeof(Event) * (size_t)w->events.cap);
    int ok = w->pending && w->earliest && w->held && w->left && w->released && w->next_phase && w->coll_of &&
             w->lane0 && w->table_of && w->busy && w->arrivals && w->freed && w->ended && w->start_seq &&
             w->compute_ready && w->running && w->fifo_len && w->fifo_at && w->compute_at && w->num_ready &&
             w->queues && w->compute_busy && w->waited && w->plan_reset && w->entry_dim && w->load &&
             w->unstarted && w->plan_reset_at && w->rel && w->events.data;
    if (!ok) {
        work_free(w);
        return -2;
    }
    /* each chunk's first lane; each stage's chunks (a lane's room: a chunk waits on one lane at a time)
     * and compute tasks (compute_at: counted, then turned into offsets) */
    int64_t *stage_chunks = calloc(stages, sizeof(int64_t));
    if (!stage_chunks) {
        work_free(w);
        return -2;
    }
    for (int c = 0; c < num_colls; c++) {
        int s = m->num_stages > 1 ? m->coll_stage[c] : 0;
        stage_chunks[s] += m->chunks[c];
        for (int k = 0; k < m->chunks[c]; k++) w->lane0[m->first_chunk[c] + k] = s * m->num_dims;
    }
    for (int j = 0; j < m->num_computes; j++) w->compute_at[(m->num_stages > 1 ? m->compute_stage[j] : 0) + 1]++;
    for (int s = 0; s < num_stages; s++) w->compute_at[s + 1] += w->compute_at[s];
    int64_t room = 0;
    for (int d = 0; d < w->num_lanes; d++) {
        w->fifo_at[d] = room;
        room += stage_chunks[d / m->num_dims] + 1;
    }
    w->fifo = malloc(sizeof(FifoEntry) * (size_t)room);
    ok = w->fifo != NULL;
    for (int d = 0; ok && d < w->num_lanes; d++) {
        int64_t cap = 2 * stage_chunks[d / m->num_dims] + 2;
        w->queues[d].cap = cap;
        w->queues[d].keys = malloc(sizeof(double) * (size_t)cap);
        w->queues[d].items = malloc(sizeof(int) * (size_t)cap);
        ok = w->queues[d].keys && w->queues[d].items;
    }
    free(stage_chunks);
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
    free(s->num_ready);
    free(s->compute_busy);
    free(s->waited);
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
           lanes = (size_t)w->num_lanes + 1, stages = (size_t)w->num_stages + 1;
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
    s->busy = malloc(sizeof(int) * lanes);
    s->compute_ready = malloc(sizeof(int) * ((size_t)w->num_computes + 1));
    s->num_ready = malloc(sizeof(int64_t) * stages);
    s->compute_busy = malloc(stages);
    s->waited = malloc(stages);
    s->queue_len = malloc(sizeof(int64_t) * lanes);
    s->fifo = malloc(sizeof(FifoEntry) * n);
    s->keys = malloc(sizeof(double) * n);
    s->items = malloc(sizeof(int) * n);
    if (!s->events || !s->rel || !s->pending || !s->earliest || !s->held || !s->released || !s->left ||
        !s->next_phase || !s->table_of || !s->start_seq || !s->busy || !s->compute_ready || !s->num_ready ||
        !s->compute_busy || !s->waited || !s->queue_len || !s->fifo || !s->keys || !s->items) {
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
    size_t stages = (size_t)w->num_stages;
    FIELD(s->events_len, w->events.len);
    FIELD(s->rel_len, w->rel_len);
    FIELD(s->seq, v->seq);
    FIELD(s->handled, v->handled);
    FIELD(s->starts, v->starts);
    COPY(s->num_ready, w->num_ready, sizeof(int64_t) * stages);
    COPY(s->compute_busy, w->compute_busy, stages);
    COPY(s->waited, w->waited, stages);
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
    COPY(s->busy, w->busy, sizeof(int) * (size_t)w->num_lanes);
    for (size_t g = 0; g < stages; g++) /* each stage's heap of ready compute tasks, where it lives */
        COPY(s->compute_ready + w->compute_at[g], w->compute_ready + w->compute_at[g],
             sizeof(int) * (size_t)w->num_ready[g]);
    int64_t at = 0;
    for (int d = 0; d < w->num_lanes; d++) {
        if (policy != SCF) {
            FIELD(s->queue_len[d], w->fifo_len[d]);
            COPY(s->fifo + at, w->fifo + w->fifo_at[d], sizeof(FifoEntry) * (size_t)s->queue_len[d]);
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
