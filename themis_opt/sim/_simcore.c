/* The simulator's event loop in C: the same rules as themis_opt/sim/engine.py's run_python
 * (read that module's docstring for them), step for step, so that makespans and schedules
 * agree exactly. themis_opt/sim/core.py prepares the arrays and reads the answers; it loads
 * this file's shared library with ctypes, so no Python header is needed to build it.
 *
 * Phases come from tables prepared in Python (one table per distinct chunk size,
 * kind and order: its phases' dimensions, durations, scf keys and rules). A chunk
 * takes its table when its collective is released: a fixed table, or the one of
 * the order Themis's planner (ASTRA-sim's OfflineGreedy, ported from
 * themis_opt/policies.py's ThemisTracker) picks then.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PHASE_DONE 0
#define COMPUTE_DONE 1
#define RELEASE 2
#define MIB 1048576.0

enum { AR = 0, RS = 1, AG = 2, A2A = 3 };

typedef struct {
    double t;
    int what, a, b;
} Event;

static int event_less(const Event *x, const Event *y) {
    if (x->t != y->t) return x->t < y->t;
    if (x->what != y->what) return x->what < y->what;
    if (x->a != y->a) return x->a < y->a;
    return x->b < y->b;
}

typedef struct {
    Event *data;
    int64_t len, cap;
} EventHeap;

/* the event's fields, not an Event by value: passing the struct on the stack stalled every push */
static inline int heap_push(EventHeap *h, double t, int what, int a, int b) {
    Event e = {t, what, a, b};
    if (h->len == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 1024;
        Event *data = realloc(h->data, (size_t)cap * sizeof(Event));
        if (!data) return -1;
        h->data = data;
        h->cap = cap;
    }
    int64_t i = h->len++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!event_less(&e, &h->data[parent])) break;
        h->data[i] = h->data[parent];
        i = parent;
    }
    h->data[i] = e;
    return 0;
}

static Event heap_pop(EventHeap *h) {
    Event top = h->data[0], last = h->data[--h->len];
    int64_t i = 0, n = h->len;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && event_less(&h->data[child + 1], &h->data[child])) child++;
        if (!event_less(&h->data[child], &last)) break;
        h->data[i] = h->data[child];
        i = child;
    }
    if (n) h->data[i] = last;
    return top;
}

/* the queue policies' codes: each QueuePolicy's c_code in themis_opt/sim/queues.py */
enum { FIFO = 0, SCF = 1, TAIL = 2 };

/* fifo and tail: a heap per dimension on (-priority, key, arrival sequence); fifo's key is 0,
 * tail's priority 0 and its key minus the phase's tail */
typedef struct {
    int64_t neg_priority, seq;
    double key;
    int item;
} FifoEntry;

static int fifo_less(const FifoEntry *x, const FifoEntry *y) {
    if (x->neg_priority != y->neg_priority) return x->neg_priority < y->neg_priority;
    if (x->key != y->key) return x->key < y->key;
    return x->seq < y->seq;
}

static void fifo_push(FifoEntry *heap, int64_t *len, FifoEntry e) {
    int64_t i = (*len)++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!fifo_less(&e, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

static int fifo_pop(FifoEntry *heap, int64_t *len) {
    FifoEntry top = heap[0], last = heap[--(*len)];
    int64_t i = 0, n = *len;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && fifo_less(&heap[child + 1], &heap[child])) child++;
        if (!fifo_less(&heap[child], &last)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (n) heap[i] = last;
    return top.item;
}

/* scf: a sequence per dimension, items in [head, head + len) of a buffer of cap */
typedef struct {
    double *keys;
    int *items; /* a chunk's rank is its collective's priority: looked up, not moved along */
    int64_t head, len, cap;
} Scf;

static void scf_recentre(Scf *q) { /* room on both sides: the sequence moves to the middle of the buffer */
    int64_t head = (q->cap - q->len) / 2;
    memmove(q->keys + head, q->keys + q->head, (size_t)q->len * sizeof(double));
    memmove(q->items + head, q->items + q->head, (size_t)q->len * sizeof(int));
    q->head = head;
}

/* inserted at position j: the shorter side moves by one slot (the front down or the back up) */
static void scf_insert(Scf *q, int64_t j, double key, int item) {
    int64_t at;
    if (j < q->len - j) {
        if (q->head == 0) scf_recentre(q);
        int64_t h = --q->head;
        memmove(q->keys + h, q->keys + h + 1, (size_t)j * sizeof(double));
        memmove(q->items + h, q->items + h + 1, (size_t)j * sizeof(int));
        at = h + j;
    } else {
        if (q->head + q->len == q->cap) scf_recentre(q);
        at = q->head + j;
        int64_t tail = q->len - j;
        memmove(q->keys + at + 1, q->keys + at, (size_t)tail * sizeof(double));
        memmove(q->items + at + 1, q->items + at, (size_t)tail * sizeof(int));
    }
    q->keys[at] = key;
    q->items[at] = item;
    q->len++;
}

static void scf_insert_before_ge(Scf *q, double key, int item) {
    int64_t j = 0;
    while (j < q->len && q->keys[q->head + j] < key) j++;
    scf_insert(q, j, key, item);
}

static void scf_insert_before_lower_rank(Scf *q, int64_t rank, double key, int item, const int64_t *priority,
                                         const int *coll_of) {
    int64_t j = 0;
    while (j < q->len && priority[coll_of[q->items[q->head + j]]] >= rank) j++;
    scf_insert(q, j, key, item);
}

static int scf_pop(Scf *q) {
    int item = q->items[q->head];
    q->head++;
    q->len--;
    if (!q->len) q->head = q->cap / 2;
    return item;
}

static double monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Themis's planner: a permutation of the dimensions (by load) and their loads */
typedef struct {
    int num_dims;
    const int64_t *size;
    const double *bandwidth;
    int *entry_dim; /* the tracker's list: entry i is dimension entry_dim[i] ... */
    double *load;   /* ... and load[entry_dim[i]] its load */
    int has_reset;
    double reset_at;
} Planner;

static void planner_reset(Planner *p) {
    for (int d = 0; d < p->num_dims; d++) {
        p->entry_dim[d] = d;
        p->load[d] = 0.0;
    }
}

static void sort_entries_by_load(Planner *p) { /* stable insertion sort, as Python's sort */
    for (int i = 1; i < p->num_dims; i++) {
        int e = p->entry_dim[i], j = i - 1;
        while (j >= 0 && p->load[p->entry_dim[j]] > p->load[e]) {
            p->entry_dim[j + 1] = p->entry_dim[j];
            j--;
        }
        p->entry_dim[j + 1] = e;
    }
}

static void reverse_entries(Planner *p) {
    for (int i = 0, j = p->num_dims - 1; i < j; i++, j--) {
        int t = p->entry_dim[i];
        p->entry_dim[i] = p->entry_dim[j];
        p->entry_dim[j] = t;
    }
}

/* One chunk's order (into order[], k dimensions) under ThemisTracker._plan's rule; charges its loads. */
static void plan_chunk(Planner *p, int kind, const int *active, int k, const unsigned char *involved,
                       int64_t nominal, int *order) {
    int is_ag = kind == AG;
    int ranked[64], charged[64]; /* dimensions of the entries, in list order */
    sort_entries_by_load(p);
    if (is_ag) reverse_entries(p);
    int r = 0;
    for (int i = 0; i < p->num_dims; i++)
        if (involved[p->entry_dim[i]]) ranked[r++] = p->entry_dim[i];
    double b0 = p->bandwidth[0];
    int64_t diff;
    if (is_ag) {
        int last = ranked[k - 1];
        double gap = fabs(p->load[ranked[k - 1]] - p->load[ranked[0]]);
        diff = (int64_t)(gap * (p->bandwidth[last] / b0) / (double)(p->size[last] - 1) * MIB);
        for (int i = 0; i < k - 1; i++) diff /= p->size[ranked[i]];
    } else {
        int first = ranked[0];
        double gap = fabs(p->load[p->entry_dim[p->num_dims - 1]] - p->load[ranked[0]]);
        diff = (int64_t)(gap * (p->bandwidth[first] / b0) /
                         ((double)(p->size[first] - 1) / (double)p->size[first]) * MIB);
    }
    if (diff < nominal / 16) { /* fall back: ascending; charged by position in dimension order */
        for (int i = 0; i < k; i++) order[i] = active[i];
        for (int d = 0; d < p->num_dims; d++) p->entry_dim[d] = d;
        if (is_ag) reverse_entries(p);
        int c = 0;
        for (int d = 0; d < p->num_dims; d++)
            if (involved[d]) charged[c++] = p->entry_dim[d];
    } else {
        for (int i = 0; i < k; i++) order[i] = charged[i] = ranked[i];
    }
    int64_t size = nominal;
    for (int i = 0; i < k; i++) {
        int d = order[i];
        int64_t n = p->size[d];
        double share = p->bandwidth[d] / b0;
        if (is_ag) {
            p->load[charged[i]] += ((double)size / MIB) * (double)(n - 1) / share;
            size *= n;
        } else {
            p->load[charged[i]] += ((double)size / MIB) * ((double)(n - 1) / (double)n) / share;
            size /= n;
        }
    }
}

/* The lexicographic rank of order[] among the permutations of active[] (k! of them). */
static int64_t perm_rank(const int *active, int k, const int *order) {
    int pos[64], used[64] = {0};
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            if (active[j] == order[i]) pos[i] = j;
    int64_t rank = 0;
    for (int i = 0; i < k; i++) {
        int smaller = 0;
        for (int j = 0; j < pos[i]; j++) smaller += !used[j];
        used[pos[i]] = 1;
        int64_t fact = 1;
        for (int m = 2; m <= k - 1 - i; m++) fact *= m;
        rank += smaller * fact;
    }
    return rank;
}

/* Every array one run works on, allocated once per run or, in a Core, once per instance. */
typedef struct {
    int num_tasks, num_colls, num_chunks, num_computes, num_dims;
    int *pending;
    double *earliest;
    unsigned char *held;
    int *left;
    unsigned char *released; /* per collective */
    int *next_phase, *coll_of, *table_of, *busy, *arrivals, *freed, *ended, *compute_ready;
    int64_t *start_seq; /* per chunk: how many phases started before its running one */
    unsigned char *running; /* per chunk, made when a run resumes */
    FifoEntry *fifo;
    int64_t *fifo_len;
    Scf *queues;
    int *entry_dim;
    double *load, *unstarted;
    EventHeap events;
    double *rel; /* a min-heap of the collectives' pending release times */
    int64_t rel_len;
} Work;

static void work_free(Work *w) {
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
static int work_alloc(Work *w, int num_tasks, int num_colls, int num_chunks, int num_computes, int num_dims) {
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

/* A run's state at the start of an instant at which a collective is released: what a later run
 * that differs from it only in collectives released from then on resumes from. */
typedef struct {
    Event *events;
    int64_t events_len;
    double *rel;
    int64_t rel_len;
    int *pending;
    double *earliest;
    unsigned char *held, *released;
    int *left, *next_phase, *table_of, *busy, *compute_ready;
    int64_t *start_seq;
    int64_t num_ready, seq, handled, starts;
    int compute_busy, waited;
    int64_t *queue_len; /* per dimension: its queue's entries, one queue after another in fifo or keys/items */
    FifoEntry *fifo;
    double *keys;
    int *items;
} Snapshot;

static void snapshot_free(Snapshot *s) {
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

static Snapshot *snapshot_new(const Work *w) {
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

/* The scalars of a run that a snapshot keeps besides w's arrays. */
typedef struct {
    int64_t num_ready, seq, handled, starts;
    int compute_busy, waited;
} Scalars;

/* take: w's state into s; else s's into w (the same fields both ways) */
static void snapshot_copy(Snapshot *s, Work *w, Scalars *v, int policy, int take) {
#define COPY(kept, live, bytes) (take ? memcpy((kept), (live), (bytes)) : memcpy((live), (kept), (bytes)))
    size_t tasks = (size_t)w->num_tasks, colls = (size_t)w->num_colls, n = (size_t)w->num_chunks;
    if (take) {
        s->events_len = w->events.len;
        s->rel_len = w->rel_len;
        s->num_ready = v->num_ready;
        s->seq = v->seq;
        s->handled = v->handled;
        s->starts = v->starts;
        s->compute_busy = v->compute_busy;
        s->waited = v->waited;
    } else {
        w->events.len = s->events_len;
        w->rel_len = s->rel_len;
        v->num_ready = s->num_ready;
        v->seq = s->seq;
        v->handled = s->handled;
        v->starts = s->starts;
        v->compute_busy = s->compute_busy;
        v->waited = s->waited;
    }
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
            if (take) s->queue_len[d] = w->fifo_len[d];
            else w->fifo_len[d] = s->queue_len[d];
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
}

/*
 * A Core keeps what a search's runs share: the work arrays, and the snapshots of a base run
 * (the search's current assignment) that a run of a neighbouring assignment resumes from.
 * A run writes its snapshots into scratch[]; core_adopt makes the last complete run the base.
 */
/*
 * An instance compiled for the core, field for field as themis_opt/sim/core.py's _ModelStruct fills it.
 * Tasks: is_coll[t], which[t] (collective or compute index), issue[t], pending_in[t]
 * (dependencies), successors of t at succ_ptr[t]..succ_ptr[t+1] (succ_task, succ_lag).
 * Collectives: chunks, first_chunk, priority, coll_tail (the tail policy's: the time after the
 * collective's end on its longest chain of tasks), kind, task_of_coll; active dimensions at
 * active_ptr[c]..; nominal (the bytes Themis plans with).
 * serial: the network's serial_phase_ends (the phases that end at an instant are handled one at a time).
 */
typedef struct {
    int num_tasks;
    const unsigned char *is_coll;
    const int *which;
    const double *issue;
    const int *pending_in;
    const int64_t *succ_ptr;
    const int *succ_task;
    const double *succ_lag;
    int num_colls;
    const int *chunks, *first_chunk;
    const int64_t *priority;
    const double *coll_tail;
    const int *kind, *task_of_coll;
    const int64_t *active_ptr;
    const int *active;
    const int64_t *nominal;
    int num_computes;
    const double *compute_dur;
    const int *task_of_compute;
    int num_dims;
    const int64_t *dim_size;
    const double *dim_bandwidth;
    int capacity, serial;
} Model;

/*
 * The phase tables: table_ptr[x]..table_ptr[x+1] into ph_dim, ph_dur, ph_key, ph_rule (bit 0: scf queues
 * it as fifo does, an all-to-all or all-reduce; bit 1: a reduce-scatter, its last step reduces) and ph_rest
 * (the durations of the table's later phases, summed first to last: tail's key, as Python sums it);
 * max_phases, the longest table (the width of a chunk's row of starts).
 */
typedef struct {
    const int64_t *table_ptr;
    const int *ph_dim;
    const double *ph_dur, *ph_key;
    const unsigned char *ph_rule;
    const double *ph_rest;
    int max_phases;
} Tables;

/* Each chunk's table: fixed_table[i], or with use_planner Themis's choice among
 * perm_table[perm_ptr[c] + size_class * k! + rank] (size_class 1: the last chunk). */
typedef struct {
    int use_planner;
    const int *fixed_table;
    const int64_t *perm_ptr;
    const int *perm_table;
} Orders;

/* What a run writes: table_of[i] per chunk, starts[i * max_phases + p], compute_starts[j]; makespan[0] the
 * last event's time, makespan[1] the last end of a phase or compute task; busy[d] each dimension's busy
 * time, coll_end[c] each collective's end (a makespan-only run writes makespan alone). */
typedef struct {
    int *table_of;
    double *starts, *compute_starts, *makespan, *busy, *coll_end;
} Out;

/* the instance and tables core_bind keeps for core_run and core_walk */
typedef struct {
    Model model;
    Tables tables;
} Bound;

typedef struct {
    int max_snapshots, ready, sizes[5];
    Bound bound;
    int bound_ok;
    Work work;
    Snapshot **base, **scratch;
    int *base_tokens, *last_tokens, *base_snap_of, *snap_of;
    int base_count, base_policy, has_base;
    double base_makespan;
    int last_ok, last_policy, last_from, last_count;
    double last_makespan;
    int64_t counts[4]; /* runs, runs resumed, events handled, events a resumed run did not handle again */
} Core;

void *core_new(int max_snapshots) {
    Core *ctx = calloc(1, sizeof(Core));
    if (!ctx) return NULL;
    ctx->max_snapshots = max_snapshots > 0 ? max_snapshots : 1;
    ctx->base = calloc((size_t)ctx->max_snapshots, sizeof(Snapshot *));
    ctx->scratch = calloc((size_t)ctx->max_snapshots, sizeof(Snapshot *));
    if (!ctx->base || !ctx->scratch) {
        free(ctx->base);
        free(ctx->scratch);
        free(ctx);
        return NULL;
    }
    return ctx;
}

void core_free(void *handle) {
    Core *ctx = handle;
    if (!ctx) return;
    for (int k = 0; k < ctx->max_snapshots; k++) {
        snapshot_free(ctx->base[k]);
        snapshot_free(ctx->scratch[k]);
    }
    free(ctx->base);
    free(ctx->scratch);
    free(ctx->base_tokens);
    free(ctx->last_tokens);
    free(ctx->base_snap_of);
    free(ctx->snap_of);
    work_free(&ctx->work);
    free(ctx);
}

/* 0, or -2 when out of memory; the arrays are made at the first run, for its sizes */
static int core_ready(Core *ctx, int num_tasks, int num_colls, int num_chunks, int num_computes, int num_dims) {
    int sizes[5] = {num_tasks, num_colls, num_chunks, num_computes, num_dims};
    if (ctx->ready) return memcmp(sizes, ctx->sizes, sizeof(sizes)) ? -2 : 0;
    if (work_alloc(&ctx->work, num_tasks, num_colls, num_chunks, num_computes, num_dims)) return -2;
    ctx->base_tokens = malloc(sizeof(int) * ((size_t)num_chunks + 1));
    ctx->last_tokens = malloc(sizeof(int) * ((size_t)num_chunks + 1));
    ctx->base_snap_of = malloc(sizeof(int) * ((size_t)num_colls + 1));
    ctx->snap_of = malloc(sizeof(int) * ((size_t)num_colls + 1));
    if (!ctx->base_tokens || !ctx->last_tokens || !ctx->base_snap_of || !ctx->snap_of) return -2;
    memcpy(ctx->sizes, sizes, sizeof(sizes));
    ctx->ready = 1;
    return 0;
}

/*
 * Makes the last run the base if it was a complete run of tokens under policy (then returns 0);
 * 1 if it was not (the caller runs it, then adopts again).
 */
int core_adopt(void *handle, const int *tokens, int policy) {
    Core *ctx = handle;
    if (!ctx->ready || !ctx->last_ok || ctx->last_policy != policy ||
        memcmp(tokens, ctx->last_tokens, sizeof(int) * (size_t)ctx->work.num_chunks))
        return 1;
    for (int k = ctx->last_from + 1; k < ctx->last_count; k++) {
        Snapshot *s = ctx->base[k];
        ctx->base[k] = ctx->scratch[k];
        ctx->scratch[k] = s;
    }
    int *t = ctx->base_tokens;
    ctx->base_tokens = ctx->last_tokens;
    ctx->last_tokens = t;
    memcpy(ctx->last_tokens, ctx->base_tokens, sizeof(int) * (size_t)ctx->work.num_chunks);
    t = ctx->base_snap_of;
    ctx->base_snap_of = ctx->snap_of;
    ctx->snap_of = t;
    memcpy(ctx->snap_of, ctx->base_snap_of, sizeof(int) * (size_t)ctx->work.num_colls);
    ctx->base_count = ctx->last_count;
    ctx->base_policy = policy;
    ctx->base_makespan = ctx->last_makespan;
    ctx->has_base = 1;
    ctx->last_from = ctx->last_count - 1; /* adopting again swaps nothing */
    return 0;
}

void core_counts(void *handle, int64_t *out) {
    Core *ctx = handle;
    for (int k = 0; k < 4; k++) out[k] = ctx->counts[k];
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
    int capacity = m->capacity, serial = m->serial;
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
        if (core_ready(ctx, num_tasks, num_colls, num_chunks, num_computes, num_dims)) return -2;
        w = &ctx->work;
        starts = compute_starts = NULL; /* the makespan only */
        ctx->last_ok = 0;
        ctx->last_policy = policy;
        ctx->counts[0]++;
        memcpy(ctx->last_tokens, fixed_table, sizeof(int) * (size_t)num_chunks);
    } else if (work_alloc(&own, num_tasks, num_colls, num_chunks, num_computes, num_dims)) {
        return -2;
    }
    int *pending = w->pending, *left = w->left, *next_phase = w->next_phase, *coll_of = w->coll_of;
    int *table_of = ctx ? w->table_of : table_of_out, *busy = w->busy, *arrivals = w->arrivals;
    int *freed = w->freed, *ended_at = w->ended, *compute_ready = w->compute_ready;
    int64_t *start_seq = w->start_seq;
    double *earliest = w->earliest, *unstarted = w->unstarted;
    unsigned char *held = w->held, *released = w->released;
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
    Scalars v = {0, 0, 0, 0, 0, 0};
    Planner planner = {num_dims, dim_size, dim_bandwidth, w->entry_dim, w->load, 0, 0.0};
    planner_reset(&planner);
    for (int c = 0; c < num_colls; c++)
        for (int k = 0; k < chunks[c]; k++) coll_of[first_chunk[c] + k] = c;
    for (int d = 0; d < num_dims; d++) unstarted[d] = 0.0;
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
                for (; at < table_ptr[x + 1]; at++) unstarted[ph_dim[at]] += ph_dur[at] * per_lane;
            }
        }
    } else {
        if (cut)
            for (int i = 0; i < num_chunks; i++)
                for (int64_t at = table_ptr[fixed_table[i]]; at < table_ptr[fixed_table[i] + 1]; at++)
                    unstarted[ph_dim[at]] += ph_dur[at] * per_lane;
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
        for (int d = 0; d < num_dims; d++) {
            busy[d] = 0;
            fifo_len[d] = 0;
            queues[d].len = 0;
            queues[d].head = queues[d].cap / 2;
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
/* the head of dimension d's queue starts now if d has room (engine.py's start_head) */
#define START_HEAD(dim_expr)                                                                          \
    do {                                                                                              \
        int dim = (dim_expr), i = -1;                                                                 \
        if (busy[dim] >= capacity) break;                                                             \
        if (policy != SCF && fifo_len[dim]) i = fifo_pop(fifo + (size_t)dim * (size_t)(num_chunks + 1), &fifo_len[dim]); \
        if (policy == SCF && queues[dim].len) i = scf_pop(&queues[dim]);                                \
        if (i < 0) break;                                                                             \
        if (starts) starts[(int64_t)i * max_phases + next_phase[i]] = now;                            \
        start_seq[i] = v.starts++;                                                                    \
        busy[dim]++;                                                                                  \
        unstarted[dim] -= ph_dur[table_ptr[table_of[i]] + next_phase[i]] * per_lane;                  \
        if (heap_push(events, now + ph_dur[table_ptr[table_of[i]] + next_phase[i]], PHASE_DONE, dim, i)) \
            goto done;                                                                                \
    } while (0)
/* chunk i's next phase joins its dimension's queue under the intra-dimension policy */
#define ENQUEUE(chunk_expr)                                                                           \
    do {                                                                                              \
        int q_i = (chunk_expr), q_p = next_phase[q_i];                                                \
        int64_t q_at = table_ptr[table_of[q_i]] + q_p;                                                \
        int q_c = coll_of[q_i], q_d = ph_dim[q_at];                                                   \
        if (policy == FIFO) {                                                                            \
            fifo_push(fifo + (size_t)q_d * (size_t)(num_chunks + 1), &fifo_len[q_d],                  \
                      (FifoEntry){-priority[q_c], v.seq++, 0.0, q_i});                                \
        } else if (policy == TAIL) { /* the chunk's phases after this one, then its collective's tail */ \
            fifo_push(fifo + (size_t)q_d * (size_t)(num_chunks + 1), &fifo_len[q_d],                  \
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
            for (int d = 0; d < num_dims; d++)
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
                v.compute_busy = 0;
                ended = task_of_compute[e.a];
            } else if (is_coll[e.a]) {
                int c = which[e.a];
                const int *act = active + active_ptr[c];
                int k = (int)(active_ptr[c + 1] - active_ptr[c]);
                released[c] = 1;
                since++;
                if (ctx) ctx->snap_of[c] = count - 1;
                if (use_planner) {
                    int fresh = !planner.has_reset || now != planner.reset_at;
                    if (fresh && !v.waited) planner_reset(&planner);
                    planner.has_reset = 1;
                    planner.reset_at = now;
                    unsigned char involved[64] = {0};
                    for (int j = 0; j < k; j++) involved[act[j]] = 1;
                    int64_t fact = 1;
                    for (int m = 2; m <= k; m++) fact *= m;
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
                    if (fresh && v.waited) planner_reset(&planner);
                } else {
                    for (int kk = 0; kk < chunks[c]; kk++) table_of[first_chunk[c] + kk] = fixed_table[first_chunk[c] + kk];
                }
                for (int kk = 0; kk < chunks[c]; kk++) arrivals[num_arrivals++] = first_chunk[c] + kk;
            } else { /* a compute task: the ready list is a heap on its index */
                int j = which[e.a], at = (int)v.num_ready++;
                while (at > 0 && compute_ready[(at - 1) / 2] > j) {
                    compute_ready[at] = compute_ready[(at - 1) / 2];
                    at = (at - 1) / 2;
                }
                compute_ready[at] = j;
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
            int lane = ph_dim[base + next_phase[i] - 1];
            int goes_on = next_phase[i] < table_ptr[table_of[i] + 1] - base;
            busy[lane]--;
            if (goes_on) ENQUEUE(i);
            START_HEAD(lane); /* its dimension takes its next waiting phase */
            if (goes_on) START_HEAD(ph_dim[base + next_phase[i]]);
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
            START_HEAD(ph_dim[table_ptr[table_of[i]] + next_phase[i]]); /* an idle dimension starts at once */
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
        if (!v.compute_busy && v.num_ready) {
            int num_ready = (int)v.num_ready;
            int j = compute_ready[0], last = compute_ready[--num_ready], at = 0;
            for (;;) { /* pop the heap's least index */
                int child = 2 * at + 1;
                if (child >= num_ready) break;
                if (child + 1 < num_ready && compute_ready[child + 1] < compute_ready[child]) child++;
                if (compute_ready[child] >= last) break;
                compute_ready[at] = compute_ready[child];
                at = child;
            }
            if (num_ready) compute_ready[at] = last;
            v.num_ready = num_ready;
            v.waited = v.waited || held[task_of_compute[j]];
            if (compute_starts) compute_starts[j] = now;
            v.compute_busy = 1;
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

/*
 * The sequence search's timing (themis_opt/search/sequence.py, _Sequences.time): earliest
 * starts (head) and tails of a graph of phases, each after its chunk's previous phase
 * (job_prev/job_next) and after the phase before it on its dimension (the sequences: seq
 * holds them one after another, seq_ptr[d]..seq_ptr[d+1] for dimension d). Returns the
 * makespan, or -1 when the sequences contradict the chunk orders (a cycle).
 */
double sequence_times(int size, const double *length, const double *release, const int *job_next,
                      const int *job_prev, int num_seqs, const int64_t *seq_ptr, const int *seq, double *head,
                      double *tail) {
    int *machine_next = malloc(sizeof(int) * (size_t)(size + 1));
    int *indegree = malloc(sizeof(int) * (size_t)(size + 1));
    int *order = malloc(sizeof(int) * (size_t)(size + 1)); /* the topological order, as Python pops it */
    int *stack = malloc(sizeof(int) * (size_t)(size + 1));
    double makespan = -1.0;
    if (!machine_next || !indegree || !order || !stack) goto done;
    for (int v = 0; v < size; v++) {
        machine_next[v] = -1;
        indegree[v] = job_prev[v] >= 0;
        head[v] = release[v];
    }
    for (int d = 0; d < num_seqs; d++)
        for (int64_t j = seq_ptr[d]; j + 1 < seq_ptr[d + 1]; j++) {
            machine_next[seq[j]] = seq[j + 1];
            indegree[seq[j + 1]]++;
        }
    int stack_len = 0, done_len = 0;
    for (int v = 0; v < size; v++)
        if (!indegree[v]) stack[stack_len++] = v;
    while (stack_len) {
        int u = stack[--stack_len];
        order[done_len++] = u;
        double end = head[u] + length[u];
        int next[2] = {job_next[u], machine_next[u]};
        for (int e = 0; e < 2; e++) {
            int v = next[e];
            if (v < 0) continue;
            if (end > head[v]) head[v] = end;
            if (!--indegree[v]) stack[stack_len++] = v;
        }
    }
    if (done_len != size) goto done;
    for (int at = size - 1; at >= 0; at--) {
        int u = order[at];
        double after = 0.0;
        int next[2] = {job_next[u], machine_next[u]};
        for (int e = 0; e < 2; e++) {
            int v = next[e];
            if (v >= 0 && length[v] + tail[v] > after) after = length[v] + tail[v];
        }
        tail[u] = after;
    }
    makespan = 0.0;
    for (int v = 0; v < size; v++)
        if (v == 0 || head[v] + length[v] > makespan) makespan = head[v] + length[v];
done:
    free(machine_next);
    free(indegree);
    free(order);
    free(stack);
    return makespan;
}

/* ---- a search's runs and moves, in a Core ---- */

/* Keeps simulate_core's instance arguments for core_run and core_walk (again whenever a table was added). */
void core_bind(void *handle, const Model *m, const Tables *tb) {
    Core *ctx = handle;
    ctx->bound.model = *m;
    ctx->bound.tables = *tb;
    ctx->bound_ok = 1;
}

/* sizeof(Model), sizeof(Tables), sizeof(Orders), sizeof(Out): themis_opt/sim/core.py checks its structs' */
void core_struct_sizes(int64_t *out) {
    out[0] = (int64_t)sizeof(Model);
    out[1] = (int64_t)sizeof(Tables);
    out[2] = (int64_t)sizeof(Orders);
    out[3] = (int64_t)sizeof(Out);
}

/* simulate_core of the bound instance with fixed tables, the makespan only (into makespan[0..1]) */
int core_run(void *handle, const int *tables, int policy, double deadline, double cutoff, double *makespan) {
    Core *ctx = handle;
    if (!ctx->bound_ok) return -2;
    Orders fixed = {0, tables, NULL, NULL};
    Out out = {NULL, NULL, NULL, makespan, NULL, NULL};
    return simulate_core(ctx, &ctx->bound.model, &ctx->bound.tables, &fixed, policy, deadline, cutoff, &out);
}

/* Python's random.Random (MT19937, as CPython's _randommodule.c), so that a walk in C draws what
 * the walk in Python draws: the state comes from and goes back to getstate()/setstate(). */
typedef struct {
    uint32_t state[624];
    uint32_t index;
} Mt;

static uint32_t mt_next(Mt *m) {
    uint32_t *mt = m->state, y;
    static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
    if (m->index >= 624) {
        int kk;
        for (kk = 0; kk < 624 - 397; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + 397] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        for (; kk < 623; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + (397 - 624)] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        y = (mt[623] & 0x80000000U) | (mt[0] & 0x7fffffffU);
        mt[623] = mt[396] ^ (y >> 1) ^ mag01[y & 0x1U];
        m->index = 0;
    }
    y = mt[m->index++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

static double mt_random(Mt *m) { /* random() */
    uint32_t a = mt_next(m) >> 5, b = mt_next(m) >> 6;
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

static int64_t mt_below(Mt *m, int64_t n) { /* _randbelow(n), n in 1 .. 2^31: choice, randrange */
    int k = 0;
    while (k < 32 && (n >> k)) k++; /* n.bit_length() */
    uint32_t r;
    do r = mt_next(m) >> (32 - k);
    while ((int64_t)r >= n);
    return (int64_t)r;
}

/*
 * A walk of the search's moves (search/assignment.py's _search, its Python loop step for step):
 * what it draws from, its stopping rules, and its state in and out.
 */
typedef struct {
    int64_t num_classes;
    const int64_t *class_ptr; /* class k's chunks' positions: places[class_ptr[k] .. class_ptr[k + 1]] */
    const int *places;
    const int64_t *known_ptr; /* the tokens some start gives class k: known[known_ptr[k] .. known_ptr[k + 1]] */
    const int *known;
    const int64_t *dims_ptr; /* class k's collective's active dimensions: dims[dims_ptr[k] .. dims_ptr[k + 1]] */
    const int *dims;
    const int64_t *token_ptr; /* class k's token of each order of its dimensions, by rank; -1: not made yet */
    int *tokens;
    int64_t keep_counts, policy, evaluations, max_draws, by_clock, first, moves, clock_draws;
    double swap_share, known_share, temperature, moves_began, span, deadline, room_factor, target, origin,
        tolerance, cutoff_margin, slice;
    uint32_t *mt; /* 625 words: the state and index of getstate() */
    int64_t used, draws;
    double longest, current_makespan, best_makespan;
    int *current, *best, *candidate; /* a token per chunk each (candidate: scratch) */
    int64_t best_changed, need_class, need_chunk;
    int *need_order; /* status 2: the order to make class need_class's token of */
} Walk;

enum { WALK_DONE = 0, WALK_SLICE = 1, WALK_NEED_TOKEN = 2, WALK_OPTIMAL = 3 };

/*
 * Runs the walk's moves until its evaluations or draws are spent (WALK_DONE), its slice of time is
 * (WALK_SLICE: call again), a random order has no token yet (WALK_NEED_TOKEN: make it, call again; the
 * draw is undone), a schedule meets the target (WALK_OPTIMAL), the time left is for building the
 * schedule (-1) or memory ran out (-2).
 */
int core_walk(void *handle, Walk *k) {
    Core *ctx = handle;
    if (!ctx->bound_ok) return -2;
    const Model *bd = &ctx->bound.model;
    int num_chunks = bd->num_colls ? bd->first_chunk[bd->num_colls - 1] + bd->chunks[bd->num_colls - 1] : 0;
    size_t row = sizeof(int) * (size_t)num_chunks;
    Mt mt, saved;
    memcpy(mt.state, k->mt, sizeof(mt.state));
    mt.index = k->mt[624];
    double slice_end = monotonic() + k->slice, makespan[2];
    int status = WALK_DONE, order[64];
    while (k->used < k->evaluations && k->draws < k->max_draws) {
        int found = 0;
        while (!found && k->draws < k->max_draws) {
            if ((k->draws + 1) % k->clock_draws == 0) { /* moves that change nothing take time too */
                double now = monotonic();
                if (now >= k->deadline) {
                    status = -1;
                    goto out;
                }
                if (now >= slice_end) {
                    status = WALK_SLICE;
                    goto out;
                }
            }
            saved = mt;
            k->draws++;
            int64_t cls = mt_below(&mt, k->num_classes), base = k->class_ptr[cls];
            int64_t n = k->class_ptr[cls + 1] - base;
            int64_t pick = mt_below(&mt, n);
            int a = k->places[base + pick];
            if (n > 1 && (k->keep_counts || mt_random(&mt) < k->swap_share)) {
                int b = k->places[base + mt_below(&mt, n)];
                if (k->current[a] == k->current[b]) continue;
                memcpy(k->candidate, k->current, row);
                k->candidate[a] = k->current[b];
                k->candidate[b] = k->current[a];
                found = 1;
                continue;
            }
            int token;
            if (mt_random(&mt) < k->known_share) {
                int64_t from = k->known_ptr[cls];
                token = k->known[from + mt_below(&mt, k->known_ptr[cls + 1] - from)];
            } else {
                int64_t from = k->dims_ptr[cls];
                int m = (int)(k->dims_ptr[cls + 1] - from);
                for (int i = 0; i < m; i++) order[i] = k->dims[from + i];
                for (int i = m - 1; i > 0; i--) {
                    int j = (int)mt_below(&mt, i + 1), t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
                token = k->tokens[k->token_ptr[cls] + perm_rank(k->dims + from, m, order)];
                if (token < 0) {
                    mt = saved;
                    k->draws--;
                    k->need_class = cls;
                    k->need_chunk = pick;
                    for (int i = 0; i < m; i++) k->need_order[i] = order[i];
                    status = WALK_NEED_TOKEN;
                    goto out;
                }
            }
            if (token == k->current[a]) continue;
            memcpy(k->candidate, k->current, row);
            k->candidate[a] = token;
            found = 1;
        }
        if (!found) break;
        double cooled = !k->by_clock ? (double)(k->used - k->first) / (double)(k->moves > 1 ? k->moves : 1)
                        : k->span > 0 ? (monotonic() - k->moves_began) / k->span
                                      : 1.0; /* no span: the deadline had passed when the moves began */
        double left = 1.0 - cooled, temperature = k->temperature * k->best_makespan * (left > 0.0 ? left : 0.0);
        double cutoff = k->current_makespan - (temperature > 0 ? temperature * log(1.0 - mt_random(&mt)) : 0.0);
        double now = monotonic();
        if (now >= k->deadline || k->deadline - now < k->room_factor * k->longest) {
            status = -1; /* the time left is for building the schedule */
            break;
        }
        k->used++;
        int ran = core_run(ctx, k->candidate, (int)k->policy, k->deadline, cutoff + fabs(cutoff) * k->cutoff_margin,
                           makespan);
        double took = monotonic() - now;
        if (took > k->longest) k->longest = took;
        if (ran == -1 || ran == -2) {
            status = ran;
            break;
        }
        double m = ran == -3 ? INFINITY : makespan[0];
        if (m < k->best_makespan) {
            k->best_makespan = m;
            memcpy(k->best, k->candidate, row);
            k->best_changed = 1;
            double span = m - k->origin;
            if (m - k->target <= k->tolerance * (span > 0.0 ? span : 0.0)) {
                status = WALK_OPTIMAL;
                break;
            }
        }
        if (m <= cutoff) {
            memcpy(k->current, k->candidate, row);
            k->current_makespan = m;
            if (core_adopt(ctx, k->current, (int)k->policy)) { /* not the last run as it stands: run it again */
                ran = core_run(ctx, k->current, (int)k->policy, k->deadline, INFINITY, makespan);
                if (ran) {
                    status = ran == -1 ? -1 : -2;
                    break;
                }
                core_adopt(ctx, k->current, (int)k->policy);
            }
        }
        if (monotonic() >= slice_end) {
            status = WALK_SLICE;
            break;
        }
    }
out:
    memcpy(k->mt, mt.state, sizeof(mt.state));
    k->mt[624] = mt.index;
    return status;
}
