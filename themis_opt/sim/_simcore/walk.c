/* A search's moves in C (core_walk), with the Mersenne Twister of CPython's random module. */
#include "simcore.h"

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
struct Walk {
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
};

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
