/* Themis's planner (ASTRA-sim's OfflineGreedy, ported from themis_opt/policies.py's ThemisTracker):
 * the order of a chunk's dimensions when its collective is released (simulate_core), and an order's
 * rank among its permutations (the table it takes; core_walk ranks its draws too). */
#include "simcore.h"

#define MIB 1048576.0

void planner_reset(Planner *p) {
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
void plan_chunk(Planner *p, int kind, const int *active, int k, const unsigned char *involved, int64_t nominal,
                int *order) {
    int is_ag = kind == AG;
    int ranked[64], charged[64]; /* dimensions of the entries, in list order */
    ranked[0] = 0; /* for the compiler alone (-Wmaybe-uninitialized): involved[] marks k >= 1 dimensions */
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
int64_t perm_rank(const int *active, int k, const int *order) {
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
