/* A Core (simcore.h): its lifecycle, and a search's runs of fixed tables in it (core_walk, walk.c,
 * runs its moves). */
#include "simcore.h"

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
int core_ready(Core *ctx, const Model *m) {
    int num_colls = m->num_colls;
    int num_chunks = num_colls ? m->first_chunk[num_colls - 1] + m->chunks[num_colls - 1] : 0;
    int sizes[6] = {m->num_tasks, num_colls, num_chunks, m->num_computes, m->num_dims, m->num_stages};
    if (ctx->ready) return memcmp(sizes, ctx->sizes, sizeof(sizes)) ? -2 : 0;
    if (work_alloc(&ctx->work, m)) return -2;
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
