#include "simcore.h"

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
