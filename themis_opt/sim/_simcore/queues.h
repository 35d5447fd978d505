/* The queues on the event loop's hot path (loop.c's simulate_core), static inline so that they
 * inline there: the event heap, the fifo and tail policies' heap, the scf policy's sequence.
 * Included by simcore.h (include that first). */
#ifndef THEMIS_SIMCORE_QUEUES_H
#define THEMIS_SIMCORE_QUEUES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* an event's what (at one instant, the order its events are handled in) */
#define PHASE_DONE 0
#define COMPUTE_DONE 1
#define RELEASE 2

typedef struct {
    double t;
    int what, a, b;
} Event;

static inline int event_less(const Event *x, const Event *y) {
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

static inline Event heap_pop(EventHeap *h) {
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

static inline int fifo_less(const FifoEntry *x, const FifoEntry *y) {
    if (x->neg_priority != y->neg_priority) return x->neg_priority < y->neg_priority;
    if (x->key != y->key) return x->key < y->key;
    return x->seq < y->seq;
}

static inline void fifo_push(FifoEntry *heap, int64_t *len, FifoEntry e) {
    int64_t i = (*len)++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!fifo_less(&e, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

static inline int fifo_pop(FifoEntry *heap, int64_t *len) {
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

static inline void scf_recentre(Scf *q) { /* room on both sides: the sequence moves to the middle of the buffer */
    int64_t head = (q->cap - q->len) / 2;
    memmove(q->keys + head, q->keys + q->head, (size_t)q->len * sizeof(double));
    memmove(q->items + head, q->items + q->head, (size_t)q->len * sizeof(int));
    q->head = head;
}

/* inserted at position j: the shorter side moves by one slot (the front down or the back up) */
static inline void scf_insert(Scf *q, int64_t j, double key, int item) {
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

static inline void scf_insert_before_ge(Scf *q, double key, int item) {
    int64_t j = 0;
    while (j < q->len && q->keys[q->head + j] < key) j++;
    scf_insert(q, j, key, item);
}

static inline void scf_insert_before_lower_rank(Scf *q, int64_t rank, double key, int item,
                                                const int64_t *priority, const int *coll_of) {
    int64_t j = 0;
    while (j < q->len && priority[coll_of[q->items[q->head + j]]] >= rank) j++;
    scf_insert(q, j, key, item);
}

static inline int scf_pop(Scf *q) {
    int item = q->items[q->head];
    q->head++;
    q->len--;
    if (!q->len) q->head = q->cap / 2;
    return item;
}

#endif
