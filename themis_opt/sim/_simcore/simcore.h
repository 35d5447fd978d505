/* The simulator's event loop in C: the same rules as themis_opt/sim/engine.py's run_python
 * (read that module's docstring for them), step for step, so that makespans and schedules
 * agree exactly. themis_opt/sim/core.py prepares the arrays and reads the answers; it loads
 * this folder's shared library with ctypes, so no Python header is needed to build it.
 *
 * Phases come from tables prepared in Python (one table per distinct chunk size,
 * kind and order: its phases' dimensions, durations, scf keys and rules). A chunk
 * takes its table when its collective is released: a fixed table, or the one of
 * the order Themis's planner (ASTRA-sim's OfflineGreedy, ported from
 * themis_opt/policies.py's ThemisTracker) picks then.
 *
 * The files (setup.py compiles every .c file here into one library, themis_opt.sim._simcore):
 * simcore.h   this header: the structs of the interface and what the files share;
 * queues.h    the event heap, the fifo/tail heap and the scf sequence (static inline: the event loop's);
 * loop.c      simulate_core, the event loop;
 * planner.c   Themis's planner;
 * work.c      a run's work arrays and its snapshots;
 * core.c      a Core's lifecycle and a search's runs (core_bind, core_struct_sizes, core_run);
 * walk.c      a search's moves (core_walk), with CPython's Mersenne Twister;
 * sequences.c sequence_times, a phase graph's times.
 * Every .c file includes this header first: _POSIX_C_SOURCE must precede the system headers.
 */
#ifndef THEMIS_SIMCORE_H
#define THEMIS_SIMCORE_H

#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queues.h"

/* on a declaration below: shared by these files, not exported from the library */
#if defined(__GNUC__) && !defined(_WIN32)
#define SIMCORE_INTERNAL __attribute__((visibility("hidden")))
#else
#define SIMCORE_INTERNAL
#endif

enum { AR = 0, RS = 1, AG = 2, A2A = 3 };

static inline double monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the structs of the interface ----
 * themis_opt/sim/core.py's ctypes structs mirror Model, Tables, Orders and Out field for field
 * (_ModelStruct, _TablesStruct, _OrdersStruct, _OutStruct; core_struct_sizes lets it check their
 * sizes), and themis_opt/search/walk.py's _Walk mirrors walk.c's Walk: change them together. */

/*
 * An instance compiled for the core, field for field as themis_opt/sim/core.py's _ModelStruct fills it.
 * Tasks: is_coll[t], which[t] (collective or compute index), issue[t], pending_in[t]
 * (dependencies), successors of t at succ_ptr[t]..succ_ptr[t+1] (succ_task, succ_lag).
 * Collectives: chunks, first_chunk, priority, coll_tail (the tail policy's: the time after the
 * collective's end on its longest chain of tasks), kind, task_of_coll; active dimensions at
 * active_ptr[c]..; nominal (the bytes Themis plans with).
 * serial: the network's serial_phase_ends (the phases that end at an instant are handled one at a time).
 * Pipeline stages: coll_stage[c] and compute_stage[j] of num_stages; each stage has its own queue per
 * dimension (a lane: stage * num_dims + dimension), its own compute unit and its own Themis planner.
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
    int num_stages;
    const int *coll_stage, *compute_stage;
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

/* ---- the library's interface (ctypes: themis_opt/sim/core.py, timers.py, themis_opt/search/walk.py) ---- */

/* loop.c */
int simulate_core(void *handle, const Model *m, const Tables *tb, const Orders *o, int policy, double deadline,
                  double cutoff, const Out *out);
/* sequences.c */
double sequence_times(int size, const double *length, const double *release, const int *job_next,
                      const int *job_prev, int num_seqs, const int64_t *seq_ptr, const int *seq, double *head,
                      double *tail);
/* core.c */
void *core_new(int max_snapshots);
void core_free(void *handle);
int core_adopt(void *handle, const int *tokens, int policy);
void core_counts(void *handle, int64_t *out);
void core_bind(void *handle, const Model *m, const Tables *tb);
void core_struct_sizes(int64_t *out);
int core_run(void *handle, const int *tables, int policy, double deadline, double cutoff, double *makespan);
/* walk.c */
typedef struct Walk Walk;
int core_walk(void *handle, Walk *k);

/* ---- planner.c ---- */

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

SIMCORE_INTERNAL void planner_reset(Planner *p);
SIMCORE_INTERNAL void plan_chunk(Planner *p, int kind, const int *active, int k, const unsigned char *involved,
                                 int64_t nominal, int *order);
SIMCORE_INTERNAL int64_t perm_rank(const int *active, int k, const int *order);

/* ---- work.c ---- */

/* Every array one run works on, allocated once per run or, in a Core, once per instance.
 * Per lane (stage * num_dims + dimension): busy, fifo_len, queues, unstarted, and the lane's heap in fifo
 * at fifo_at[lane] (room for its stage's chunks); per stage: compute_busy, waited, num_ready, its
 * ready compute tasks' heap in compute_ready at compute_at[stage], and its planner's reset and
 * entries (entry_dim and load at stage * num_dims); lane0[i], chunk i's stage's first lane. */
typedef struct {
    int num_tasks, num_colls, num_chunks, num_computes, num_dims, num_stages, num_lanes;
    int *pending;
    double *earliest;
    unsigned char *held;
    int *left;
    unsigned char *released; /* per collective */
    int *next_phase, *coll_of, *lane0, *table_of, *busy, *arrivals, *freed, *ended, *compute_ready;
    int64_t *start_seq; /* per chunk: how many phases started before its running one */
    unsigned char *running; /* per chunk, made when a run resumes */
    FifoEntry *fifo;
    int64_t *fifo_len, *fifo_at, *compute_at, *num_ready;
    Scf *queues;
    unsigned char *compute_busy, *waited, *plan_reset;
    int *entry_dim;
    double *load, *unstarted, *plan_reset_at;
    EventHeap events;
    double *rel; /* a min-heap of the collectives' pending release times */
    int64_t rel_len;
} Work;

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
    int64_t *start_seq, *num_ready;
    unsigned char *compute_busy, *waited;
    int64_t seq, handled, starts;
    int64_t *queue_len; /* per lane: its queue's entries, one queue after another in fifo or keys/items */
    FifoEntry *fifo;
    double *keys;
    int *items;
} Snapshot;

/* The scalars of a run that a snapshot keeps besides w's arrays. */
typedef struct {
    int64_t seq, handled, starts;
} Scalars;

SIMCORE_INTERNAL void work_free(Work *w);
SIMCORE_INTERNAL int work_alloc(Work *w, const Model *m);
SIMCORE_INTERNAL void snapshot_free(Snapshot *s);
SIMCORE_INTERNAL Snapshot *snapshot_new(const Work *w);
SIMCORE_INTERNAL void snapshot_copy(Snapshot *s, Work *w, Scalars *v, int policy, int take);

/* ---- core.c ---- */

/*
 * A Core keeps what a search's runs share: the work arrays, and the snapshots of a base run
 * (the search's current assignment) that a run of a neighbouring assignment resumes from.
 * A run writes its snapshots into scratch[]; core_adopt makes the last complete run the base.
 */
typedef struct {
    int max_snapshots, ready, sizes[6];
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

SIMCORE_INTERNAL int core_ready(Core *ctx, const Model *m);

#endif
