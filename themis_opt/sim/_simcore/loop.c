/* The event loop (simulate_core): themis_opt/sim/engine.py's run_python in C, step for step (simcore.h's
 * first comment); its queues are queues.h's, Themis's planner is planner.c's, its work arrays work.c's. */
#include "simcore.h"

static void rel_push(Work *w, double t) {
    int64_t i = w->rel_len++;
    while (i > 0 && w->rel[(i - 1) / 2] > t) {
        w->rel[i] = w->rel[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->rel[i] = t;
}

static void rel_pop(Work *w) {
    double last = w->rel[--w->rel_len];
    int64_t i = 0, n = w->rel_len;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && w->rel[child + 1] < w->rel[child]) child++;
        if (w->rel[child] >= last) break;
        w->rel[i] = w->rel[child];
        i = child;
    }
    if (n) w->rel[i] = last;
}

/*
 * Returns 0, -1 when deadline (CLOCK_MONOTONIC seconds)
 * passed first, -2 when out of memory, -3 when the makespan is sure to exceed cutoff
 * (fixed tables only: some dimension's phases not yet started, run back to back from
 * now, would end after it; out->makespan[0] is then that lower bound).
 *
 * handle: NULL, or a Core (core_new) for runs of fixed tables that want the makespan
 * only (out's table_of, starts, compute_starts, busy and coll_end are then not written):
 * such a run resumes from the Core's base run where it can (core_adopt).
 */
int simulate_core(void *handle, const Model *m, const Tables *tb, const Orders *o, int policy, double deadline,
                  double cutoff, const Out *out) {
    /* the model's, the tables' and the orders' fields under their own names */
    int num_tasks = m->num_tasks, num_colls = m->num_colls, num_computes = m->num_computes, num_dims = m->num_dims;
    const unsigned char *is_coll = m->is_coll;
    const int *which = m->which, *pending_in = m->pending_in, *succ_task = m->succ_task, *chunks = m->chunks;
    const int *first_chunk = m->first_chunk, *kind = m->kind, *task_of_coll = m->task_of_coll, *active = m->active;
    const int *task_of_compute = m->task_of_compute;
    const double *issue = m->issue, *succ_lag = m->succ_lag, *coll_tail = m->coll_tail, *compute_dur = m->compute_dur;
    const double *dim_bandwidth = m->dim_bandwidth;
    const int64_t *succ_ptr = m->succ_ptr, *priority = m->priority, *active_ptr = m->active_ptr;
    const int64_t *nominal = m->nominal, *dim_size = m->dim_size;
    int capacity = m->capacity, serial = m->serial, num_stages = m->num_stages > 0 ? m->num_stages : 1;
    int num_lanes = num_stages * num_dims;
    const int *coll_stage = m->coll_stage, *compute_stage = m->compute_stage;
    const int64_t *table_ptr = tb->table_ptr;
    const int *ph_dim = tb->ph_dim;
    const double *ph_dur = tb->ph_dur, *ph_key = tb->ph_key, *ph_rest = tb->ph_rest;
    const unsigned char *ph_rule = tb->ph_rule;
    int max_phases = tb->max_phases;
    int use_planner = o->use_planner;
    const int *fixed_table = o->fixed_table, *perm_table = o->perm_table;
    const int64_t *perm_ptr = o->perm_ptr;
    int *table_of_out = out->table_of;
    double *starts = out->starts, *compute_starts = out->compute_starts, *makespan = out->makespan;
    double *busy_out = out->busy, *coll_end = out->coll_end;
    int num_chunks = num_colls ? first_chunk[num_colls - 1] + chunks[num_colls - 1] : 0;
    Core *ctx = use_planner ? NULL : handle;
    Work own, *w = &own;
    int status = -2;
    if (ctx) {
        if (core_ready(ctx, m)) return -2;
        w = &ctx->work;
        starts = compute_starts = NULL; /* the makespan only */
        ctx->last_ok = 0;
        ctx->last_policy = policy;
        ctx->counts[0]++;
        memcpy(ctx->last_tokens, fixed_table, sizeof(int) * (size_t)num_chunks);
    } else if (work_alloc(&own, m)) {
        return -2;
    }
    int *pending = w->pending, *left = w->left, *next_phase = w->next_phase, *coll_of = w->coll_of;
    int *table_of = ctx ? w->table_of : table_of_out, *busy = w->busy, *arrivals = w->arrivals;
    int *freed = w->freed, *ended_at = w->ended, *compute_ready = w->compute_ready, *lane0 = w->lane0;
    int64_t *start_seq = w->start_seq, *fifo_at = w->fifo_at, *compute_at = w->compute_at;
    int64_t *num_ready = w->num_ready;
    double *earliest = w->earliest, *unstarted = w->unstarted;
    unsigned char *held = w->held, *released = w->released, *compute_busy = w->compute_busy, *waited = w->waited;
    FifoEntry *fifo = w->fifo;
    int64_t *fifo_len = w->fifo_len;
    Scf *queues = w->queues;
    EventHeap *events = &w->events;
    /* where this run resumes: the base's last snapshot before the first collective it changes */
    int from = -1;
    if (ctx && ctx->has_base && ctx->base_policy == policy) {
        from = ctx->base_count; /* past the last: nothing changed */
        for (int c = 0; c < num_colls; c++)
            for (int i = first_chunk[c]; i < first_chunk[c] + chunks[c]; i++)
                if (fixed_table[i] != ctx->base_tokens[i]) {
                    if (ctx->base_snap_of[c] < from) from = ctx->base_snap_of[c];
                    break;
                }
        if (from == ctx->base_count) { /* the base itself */
            makespan[0] = ctx->base_makespan;
            /* the base's releases, not the last run's: adopting this run must keep them */
            memcpy(ctx->snap_of, ctx->base_snap_of, sizeof(int) * (size_t)num_colls);
            ctx->last_makespan = ctx->base_makespan;
            ctx->last_from = ctx->last_count = ctx->base_count;
            ctx->last_ok = 1;
            ctx->counts[1]++;
            return 0;
        }
    }
    /* the cutoff needs every chunk's table before its release: with fixed tables only */
    int cut = !use_planner && cutoff < INFINITY;
    double per_lane = 1.0 / (double)capacity;
    Scalars v = {0, 0, 0};
    for (int g = 0; g < num_stages; g++) { /* each stage's planner, fresh */
        Planner fresh = {num_dims, dim_size, dim_bandwidth, w->entry_dim + g * num_dims, w->load + g * num_dims, 0, 0.0};
        planner_reset(&fresh);
        w->plan_reset[g] = 0;
        w->plan_reset_at[g] = 0.0;
    }
    for (int c = 0; c < num_colls; c++)
        for (int k = 0; k < chunks[c]; k++) coll_of[first_chunk[c] + k] = c;
    for (int d = 0; d < num_lanes; d++) unstarted[d] = 0.0;
    int resumed = from >= 0;
    if (resumed) {
        snapshot_copy(ctx->base[from], w, &v, policy, 0);
        memcpy(ctx->snap_of, ctx->base_snap_of, sizeof(int) * (size_t)num_colls);
        ctx->counts[1]++;
        ctx->counts[3] += v.handled;
        if (cut) { /* what is left of the released collectives' phases, and all of the others' */
            memset(w->running, 0, (size_t)num_chunks);
            for (int64_t e = 0; e < events->len; e++)
                if (events->data[e].what == PHASE_DONE) w->running[events->data[e].b] = 1;
            for (int i = 0; i < num_chunks; i++) {
                int x = released[coll_of[i]] ? table_of[i] : fixed_table[i];
                int64_t at = table_ptr[x] + (released[coll_of[i]] ? next_phase[i] + w->running[i] : 0);
                for (; at < table_ptr[x + 1]; at++) unstarted[lane0[i] + ph_dim[at]] += ph_dur[at] * per_lane;
            }
        }
    } else {
        if (cut)
            for (int i = 0; i < num_chunks; i++)
                for (int64_t at = table_ptr[fixed_table[i]]; at < table_ptr[fixed_table[i] + 1]; at++)
                    unstarted[lane0[i] + ph_dim[at]] += ph_dur[at] * per_lane;
        for (int t = 0; t < num_tasks; t++) {
            pending[t] = pending_in[t];
            earliest[t] = issue[t];
            held[t] = 0;
        }
        for (int c = 0; c < num_colls; c++) {
            left[c] = chunks[c];
            released[c] = 0;
        }
        for (int i = 0; i < num_chunks; i++) next_phase[i] = 0;
        for (int d = 0; d < num_lanes; d++) {
            busy[d] = 0;
            fifo_len[d] = 0;
            queues[d].len = 0;
            queues[d].head = queues[d].cap / 2;
        }
        for (int g = 0; g < num_stages; g++) {
            compute_busy[g] = waited[g] = 0;
            num_ready[g] = 0;
        }
        events->len = 0;
        w->rel_len = 0;
        for (int t = 0; t < num_tasks; t++)
            if (!pending[t]) {
                if (heap_push(events, earliest[t], RELEASE, t, 0)) goto done;
                if (is_coll[t]) rel_push(w, earliest[t]);
            }
    }
    int count = resumed ? from + 1 : 0; /* the snapshots this run has (the base's up to from) */
    int stride = ctx ? (num_colls + ctx->max_snapshots - 1) / ctx->max_snapshots : 0, since = stride;
    if (resumed) since = 0;
    double now = 0.0;
    int order[64];
/* the head of a lane's queue starts now if the lane has room (engine.py's start_head) */
#define START_HEAD(dim_expr)                                                                          \
    do {                                                                                              \
        int dim = (dim_expr), i = -1;                                                                 \
        if (busy[dim] >= capacity) break;                                                             \
        if (policy != SCF && fifo_len[dim]) i = fifo_pop(fifo + fifo_at[dim], &fifo_len[dim]);       \
        if (policy == SCF && queues[dim].len) i = scf_pop(&queues[dim]);                                \
        if (i < 0) break;                                                                             \
        if (starts) starts[(int64_t)i * max_phases + next_phase[i]] = now;                            \
        start_seq[i] = v.starts++;                                                                    \
        busy[dim]++;                                                                                  \
        unstarted[dim] -= ph_dur[table_ptr[table_of[i]] + next_phase[i]] * per_lane;                  \
        if (heap_push(events, now + ph_dur[table_ptr[table_of[i]] + next_phase[i]], PHASE_DONE, dim, i)) \
            goto done;                                                                                \
    } while (0)
/* chunk i's next phase joins its lane's queue under the intra-dimension policy */
#define ENQUEUE(chunk_expr)                                                                           \
    do {                                                                                              \
        int q_i = (chunk_expr), q_p = next_phase[q_i];                                                \
        int64_t q_at = table_ptr[table_of[q_i]] + q_p;                                                \
        int q_c = coll_of[q_i], q_d = lane0[q_i] + ph_dim[q_at];                                      \
        if (policy == FIFO) {                                                                            \
            fifo_push(fifo + fifo_at[q_d], &fifo_len[q_d],                                            \
                      (FifoEntry){-priority[q_c], v.seq++, 0.0, q_i});                                \
        } else if (policy == TAIL) { /* the chunk's phases after this one, then its collective's tail */ \
            fifo_push(fifo + fifo_at[q_d], &fifo_len[q_d],                                            \
                      (FifoEntry){0, v.seq++, -(ph_rest[q_at] + coll_tail[q_c]), q_i});               \
        } else if (ph_rule[q_at] & 1) {                                                               \
            scf_insert_before_lower_rank(&queues[q_d], priority[q_c], ph_key[q_at], q_i, priority, coll_of); \
        } else if (q_p == table_ptr[table_of[q_i] + 1] - table_ptr[table_of[q_i]] - 2) { /* one after */ \
            scf_insert(&queues[q_d], queues[q_d].len, ph_key[q_at], q_i);                             \
        } else {                                                                                      \
            scf_insert_before_ge(&queues[q_d], ph_key[q_at], q_i);                                    \
        }                                                                                             \
    } while (0)
    while (events->len) {
        now = events->data[0].t;
        while (w->rel_len && w->rel[0] < now) rel_pop(w);
        if (ctx && w->rel_len && w->rel[0] == now && !resumed && since >= stride && count < ctx->max_snapshots) {
            if (!ctx->scratch[count] && !(ctx->scratch[count] = snapshot_new(w))) goto done;
            snapshot_copy(ctx->scratch[count++], w, &v, policy, 1);
            since = 0;
        }
        resumed = 0;
        if (cut)
            for (int d = 0; d < num_lanes; d++)
                if (now + unstarted[d] > cutoff) { /* the sums' rounding is covered by the caller's margin */
                    makespan[0] = now + unstarted[d];
                    status = -3;
                    goto done;
                }
        int num_arrivals = 0, num_freed = 0, num_ended = 0;
        while (events->len && events->data[0].t == now) {
            Event e = heap_pop(events);
            if (!(++v.handled & 4095) && monotonic() >= deadline) {
                status = -1;
                goto done;
            }
            int ended = -1;
            if (e.what == PHASE_DONE) {
                int i = e.b;
                next_phase[i]++;
                if (serial) {
                    ended_at[num_ended++] = i;
                } else {
                    busy[e.a]--;
                    freed[num_freed++] = e.a;
                }
                int x = table_of[i];
                if (next_phase[i] < table_ptr[x + 1] - table_ptr[x]) {
                    if (!serial) arrivals[num_arrivals++] = i;
                } else if (!--left[coll_of[i]]) {
                    ended = task_of_coll[coll_of[i]];
                }
            } else if (e.what == COMPUTE_DONE) {
                compute_busy[num_stages > 1 ? compute_stage[e.a] : 0] = 0;
                ended = task_of_compute[e.a];
            } else if (is_coll[e.a]) {
                int c = which[e.a];
                const int *act = active + active_ptr[c];
                int k = (int)(active_ptr[c + 1] - active_ptr[c]);
                released[c] = 1;
                since++;
                if (ctx) ctx->snap_of[c] = count - 1;
                if (use_planner) { /* the collective's stage's planner */
                    int g = num_stages > 1 ? coll_stage[c] : 0;
                    Planner planner = {num_dims, dim_size, dim_bandwidth, w->entry_dim + g * num_dims,
                                       w->load + g * num_dims, w->plan_reset[g], w->plan_reset_at[g]};
                    int fresh = !planner.has_reset || now != planner.reset_at;
                    if (fresh && !waited[g]) planner_reset(&planner);
                    w->plan_reset[g] = 1;
                    w->plan_reset_at[g] = now;
                    unsigned char involved[64] = {0};
                    for (int j = 0; j < k; j++) involved[act[j]] = 1;
                    int64_t fact = 1;
                    for (int f = 2; f <= k; f++) fact *= f;
                    for (int kk = 0; kk < chunks[c]; kk++) {
                        if (kind[c] == A2A) {
                            for (int j = 0; j < k; j++) order[j] = act[j];
                        } else {
                            plan_chunk(&planner, kind[c], act, k, involved, nominal[c], order);
                        }
                        int size_class = kk == chunks[c] - 1;
                        table_of[first_chunk[c] + kk] =
                            perm_table[perm_ptr[c] + size_class * fact + perm_rank(act, k, order)];
                    }
                    if (fresh && waited[g]) planner_reset(&planner);
                } else {
                    for (int kk = 0; kk < chunks[c]; kk++) table_of[first_chunk[c] + kk] = fixed_table[first_chunk[c] + kk];
                }
                for (int kk = 0; kk < chunks[c]; kk++) arrivals[num_arrivals++] = first_chunk[c] + kk;
            } else { /* a compute task: its stage's ready list is a heap on its index */
                int j = which[e.a], g = num_stages > 1 ? compute_stage[j] : 0, at = (int)num_ready[g]++;
                int *heap = compute_ready + compute_at[g];
                while (at > 0 && heap[(at - 1) / 2] > j) {
                    heap[at] = heap[(at - 1) / 2];
                    at = (at - 1) / 2;
                }
                heap[at] = j;
            }
            if (ended >= 0) {
                for (int64_t s = succ_ptr[ended]; s < succ_ptr[ended + 1]; s++) {
                    int dep = succ_task[s];
                    if (now + succ_lag[s] > earliest[dep]) {
                        earliest[dep] = now + succ_lag[s];
                        held[dep] = is_coll[ended];
                    }
                    if (!--pending[dep]) {
                        if (heap_push(events, earliest[dep], RELEASE, dep, 0)) goto done;
                        if (is_coll[dep]) rel_push(w, earliest[dep]);
                    }
                }
            }
        }
        /* serial: one ended phase at a time, reduce-scatters last, else in the order they started */
        for (int a = 1; a < num_ended; a++) { /* insertion sort: a few at an instant */
            int x = ended_at[a], b = a - 1;
            int x_rs = (ph_rule[table_ptr[table_of[x]] + next_phase[x] - 1] & 2) != 0;
            while (b >= 0) {
                int y = ended_at[b];
                int y_rs = (ph_rule[table_ptr[table_of[y]] + next_phase[y] - 1] & 2) != 0;
                if (y_rs < x_rs || (y_rs == x_rs && start_seq[y] < start_seq[x])) break;
                ended_at[b + 1] = y;
                b--;
            }
            ended_at[b + 1] = x;
        }
        for (int a = 0; a < num_ended; a++) {
            int i = ended_at[a];
            int64_t base = table_ptr[table_of[i]];
            int lane = lane0[i] + ph_dim[base + next_phase[i] - 1];
            int goes_on = next_phase[i] < table_ptr[table_of[i] + 1] - base;
            busy[lane]--;
            if (goes_on) ENQUEUE(i);
            START_HEAD(lane); /* its dimension takes its next waiting phase */
            if (goes_on) START_HEAD(lane0[i] + ph_dim[base + next_phase[i]]);
        }
        /* (collective, chunk) order, except that a chunk going on on the dimension it frees goes first */
        int stay_end = 0;
        for (int a = 0; a < num_arrivals; a++) {
            int i = arrivals[a], p = next_phase[i];
            int64_t base = table_ptr[table_of[i]];
            if (p > 0 && ph_dim[base + p - 1] == ph_dim[base + p]) {
                arrivals[a] = arrivals[stay_end];
                arrivals[stay_end++] = i;
            }
        }
        /* both groups by chunk index (insertion sort: arrivals come nearly sorted) */
        for (int g = 0; g < 2; g++) {
            int lo = g ? stay_end : 0, hi = g ? num_arrivals : stay_end;
            for (int a = lo + 1; a < hi; a++) {
                int x = arrivals[a], b = a - 1;
                while (b >= lo && arrivals[b] > x) {
                    arrivals[b + 1] = arrivals[b];
                    b--;
                }
                arrivals[b + 1] = x;
            }
        }
        for (int a = 0; a < num_arrivals; a++) {
            int i = arrivals[a];
            ENQUEUE(i);
            START_HEAD(lane0[i] + ph_dim[table_ptr[table_of[i]] + next_phase[i]]); /* an idle lane starts at once */
        }
        /* then every freed dimension, by index (a dimension freed twice is tried twice) */
        for (int f = 1; f < num_freed; f++) {
            int x = freed[f], b = f - 1;
            while (b >= 0 && freed[b] > x) {
                freed[b + 1] = freed[b];
                b--;
            }
            freed[b + 1] = x;
        }
        for (int f = 0; f < num_freed; f++) START_HEAD(freed[f]);
        for (int g = 0; g < num_stages; g++) { /* each stage's compute unit, if idle, takes its least ready task */
            if (compute_busy[g] || !num_ready[g]) continue;
            int *heap = compute_ready + compute_at[g];
            int ready = (int)num_ready[g];
            int j = heap[0], last = heap[--ready], at = 0;
            for (;;) { /* pop the heap's least index */
                int child = 2 * at + 1;
                if (child >= ready) break;
                if (child + 1 < ready && heap[child + 1] < heap[child]) child++;
                if (heap[child] >= last) break;
                heap[at] = heap[child];
                at = child;
            }
            if (ready) heap[at] = last;
            num_ready[g] = ready;
            waited[g] = waited[g] || held[task_of_compute[j]];
            if (compute_starts) compute_starts[j] = now;
            compute_busy[g] = 1;
            if (heap_push(events, now + compute_dur[j], COMPUTE_DONE, j, 0)) goto done;
        }
    }
#undef ENQUEUE
#undef START_HEAD
    makespan[0] = now;
    status = 0;
    if (ctx) {
        ctx->last_makespan = now;
        ctx->last_from = from;
        ctx->last_count = count;
        ctx->last_ok = 1;
        goto done;
    }
    /* the summary, summed in (chunk, phase) order as Schedule.busy_ns sums it */
    double latest = 0.0;
    for (int d = 0; d < num_dims; d++) busy_out[d] = 0.0;
    for (int c = 0; c < num_colls; c++) coll_end[c] = 0.0;
    for (int i = 0; i < num_chunks; i++) {
        int64_t base = table_ptr[table_of[i]], count = table_ptr[table_of[i] + 1] - base;
        for (int64_t p = 0; p < count; p++) {
            double start = starts[(int64_t)i * max_phases + p], end = start + ph_dur[base + p];
            busy_out[ph_dim[base + p]] += end - start;
            if (end > coll_end[coll_of[i]]) coll_end[coll_of[i]] = end;
            if (end > latest) latest = end;
        }
    }
    for (int j = 0; j < num_computes; j++) {
        double end = compute_starts[j] + compute_dur[j];
        if (end > latest) latest = end;
    }
    makespan[1] = latest;
done:
    if (ctx) ctx->counts[2] += v.handled - (from >= 0 ? ctx->base[from]->handled : 0);
    if (!ctx) work_free(&own);
    return status;
}
