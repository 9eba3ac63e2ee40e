/*
 * Test driver for a generated model, compiled by tests/test_embedded_c.py with
 *     -DPREFIX=disk -DUPREFIX=DISK -DHEADER='"disk.h"'
 * It exercises every entry point, the error paths and two threads, and prints
 * results as %.17g for comparison with the Python module. Exit status 0 means
 * every check inside passed; run under sanitizers and valgrind.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include HEADER

#define CAT(a, b) a##_##b
#define XCAT(a, b) CAT(a, b)
#define F(name) XCAT(PREFIX, name)
#define C(name) XCAT(UPREFIX, name)

#define POINTS 16
#define ROWS (C(NQ) + C(NU))

static double q_points[POINTS][C(NQ) + 1], u_points[POINTS][C(NU) + 1];
static double r_points[POINTS][C(NR) + 1];
static int failures = 0;

#define CHECK(condition, message) do { if (!(condition)) { \
    fprintf(stderr, "FAILED: %s (line %d)\n", message, __LINE__); ++failures; } } while (0)

static double lcg(unsigned long *state)
{
    *state = *state * 6364136223846793005UL + 1442695040888963407UL;
    return (double)((*state >> 11) & ((1UL << 53) - 1)) / 9007199254740992.0 - 0.5;
}

typedef struct {
    int first, count;
    double A[POINTS][C(NX) * C(NX) + 1];
    double B[POINTS][C(NX) * C(NR) + 1];
    int status[POINTS];
} job;

static void run(job *j)
{
    F(workspace) work;
    int i;
    for (i = j->first; i < j->first + j->count; ++i)
        j->status[i] = F(linearize)(0.25, q_points[i], u_points[i], r_points[i], NULL, NULL, NULL,
                                    1e-8, j->A[i], j->B[i], NULL, NULL, NULL, NULL, &work);
}

static void *thread_main(void *argument)
{
    run((job *)argument);
    return NULL;
}

static void print_vector(const char *label, const double *v, int n)
{
    int i;
    printf("%s", label);
    for (i = 0; i < n; ++i) printf(" %.17g", v[i]);
    printf("\n");
}

int main(void)
{
    static job serial, threaded_a, threaded_b;
    /* the largest workspace serves every function: &full->local.base for the
       base family, &full->local for the local one; on the heap and never
       initialized, so valgrind sees every read of a value no call wrote */
    F(full_workspace) *full = malloc(sizeof *full);
    F(workspace) *base = &full->local.base;
    F(local_workspace) *local = &full->local;
    /* a fresh workspace before each call that does not read the last one's */
#define RENEW() do { free(full); full = malloc(sizeof *full); if (full == NULL) return 2; \
                     base = &full->local.base; local = &full->local; } while (0)
    unsigned long state = 12345;
    double A_full[ROWS * C(NX) + 1], B_full[ROWS * C(NR) + 1], qd[C(NQ) + 1], ud[C(NU) + 1];
    double f_c[C(NC) + 1], f_v[C(NV) + 1], q[C(NQ) + 1];
    pthread_t thread_a, thread_b;
    int i, status, completed = 0;

    /* consistent points: random guesses completed by Newton's method */
    for (i = 0; i < POINTS; ++i) {
        int k;
        for (k = 0; k < C(NQ); ++k) q_points[i][k] = 0.6 * lcg(&state);
        for (k = 0; k < C(NU); ++k) u_points[i][k] = 2.0 * lcg(&state);
        for (k = 0; k < C(NR); ++k) r_points[i][k] = lcg(&state);
        status = F(complete_point)(0.25, q_points[i], u_points[i], NULL, NULL, NULL, 1e-13, 50, base);
        CHECK(status == C(OK), "complete_point");
        completed += status == C(OK);
        status = F(constraint_residuals)(0.25, q_points[i], u_points[i], NULL, f_c, f_v);
        CHECK(status == C(OK), "constraint_residuals");
        for (k = 0; k < C(NC); ++k) CHECK(fabs(f_c[k]) <= 1e-13, "f_c after completion");
        for (k = 0; k < C(NV); ++k) CHECK(fabs(f_v[k]) <= 1e-12, "f_v after completion");
    }
    printf("completed %d\n", completed);

    /* serial, then the same points split over two threads with their own workspaces */
    serial.first = 0;
    serial.count = POINTS;
    run(&serial);
    threaded_a.first = 0;
    threaded_a.count = POINTS / 2;
    threaded_b.first = POINTS / 2;
    threaded_b.count = POINTS - POINTS / 2;
    CHECK(pthread_create(&thread_a, NULL, thread_main, &threaded_a) == 0, "pthread_create");
    CHECK(pthread_create(&thread_b, NULL, thread_main, &threaded_b) == 0, "pthread_create");
    pthread_join(thread_a, NULL);
    pthread_join(thread_b, NULL);
    for (i = 0; i < POINTS; ++i) {
        const job *t = i < POINTS / 2 ? &threaded_a : &threaded_b;
        CHECK(serial.status[i] == C(OK), "linearize status");
        CHECK(t->status[i] == serial.status[i], "threaded status");
        CHECK(memcmp(t->A[i], serial.A[i], sizeof serial.A[i]) == 0, "threaded A differs from serial");
        CHECK(memcmp(t->B[i], serial.B[i], sizeof serial.B[i]) == 0, "threaded B differs from serial");
    }

    /* results for comparison with the Python module */
    for (i = 0; i < 3; ++i) {
        printf("point %d\n", i);
        print_vector("q", q_points[i], C(NQ));
        print_vector("u", u_points[i], C(NU));
        print_vector("r", r_points[i], C(NR));
        print_vector("A", serial.A[i], C(NX) * C(NX));
        print_vector("B", serial.B[i], C(NX) * C(NR));
    }

    /* optional outputs: everything NULL but A_full, then qd/ud only */
    RENEW();
    status = F(linearize)(0.25, q_points[0], u_points[0], r_points[0], NULL, NULL, NULL, 1e-8,
                          NULL, NULL, A_full, B_full, qd, ud, base);
    CHECK(status == C(OK), "linearize with full outputs");
    print_vector("A_full", A_full, ROWS * C(NX));
    print_vector("qd", qd, C(NQ));
    print_vector("ud", ud, C(NU));
    RENEW();
    status = F(state_derivative)(0.25, q_points[0], u_points[0], r_points[0], NULL, qd, ud, base);
    CHECK(status == C(OK), "state_derivative");
    print_vector("state_derivative_ud", ud, C(NU));

    /* batches: the points and, among them, a non-finite one and one off the
       constraints, with inputs in rows of their own stride and per-point
       times; each point's status, A, B, A', B', qd*, ud*, condition
       estimates and steadiness as one call each gives them, bit for bit
       (the lane code where linked: -D<MODEL>_LANES_KERNELS) */
    {
        enum { N = POINTS + 3, SQ = C(NQ) + 1, SU = C(NU) + 1, SR = C(NR) + 1 };
        double *qb = malloc(sizeof(double) * N * SQ), *ub = malloc(sizeof(double) * N * SU);
        double *rb = malloc(sizeof(double) * N * SR), *tb = malloc(sizeof(double) * N);
        double *Ab = malloc(sizeof(double) * N * C(NX) * C(NX) + 1);
        double *Bb = malloc(sizeof(double) * N * C(NX) * C(NR) + 1);
        double *Afb = malloc(sizeof(double) * N * ROWS * C(NX) + 1);
        double *qdb = malloc(sizeof(double) * N * C(NQ)), *udb = malloc(sizeof(double) * N * C(NU));
        double *cb = malloc(sizeof(double) * N * 2);
        int *sb = malloc(sizeof(int) * N), *ub_flags = malloc(sizeof(int) * N * C(NX) + 1);
        double A1[C(NX) * C(NX) + 1], B1[C(NX) * C(NR) + 1], c1[2];
        int flags1[C(NX) + 1], k, first = C(OK);
        F(batch_workspace) *bw = malloc(sizeof *bw);
        if (!qb || !ub || !rb || !tb || !Ab || !Bb || !Afb || !qdb || !udb || !cb || !sb || !ub_flags || !bw)
            return 2;
        for (i = 0; i < N; ++i) {
            const int from = i < POINTS ? i : i - POINTS;
            memcpy(qb + i * SQ, q_points[from], sizeof(double) * SQ);
            memcpy(ub + i * SU, u_points[from], sizeof(double) * SU);
            memcpy(rb + i * SR, r_points[from], sizeof(double) * SR);
            tb[i] = 0.25;
        }
        qb[POINTS * SQ] = NAN;                                   /* non-finite */
        for (k = 0; k < C(NQ); ++k) qb[(POINTS + 1) * SQ + k] += 0.3;   /* off the constraints */
        status = F(linearize_batch)(N, tb, 1, qb, SQ, ub, SU, rb, SR, NULL, 0, NULL, NULL, 1e-8, Ab,
                                    C(NR) ? Bb : NULL, Afb, NULL, qdb, udb, cb, 1e-9, ub_flags, sb, bw);
        for (i = 0; i < N; ++i) {
            RENEW();
            int s = F(linearize)(tb[i], qb + i * SQ, ub + i * SU, rb + i * SR, NULL, NULL, NULL, 1e-8,
                                 A1, B1, A_full, NULL, qd, ud, base);
            if (first == C(OK)) first = s;
            CHECK(sb[i] == s, "batch status");
            if (s != C(OK)) continue;
            F(partition_condition)(base, 0, c1);
            F(unsteady_states)(base, NULL, A1, NULL, 1e-9, flags1);
            CHECK(memcmp(Ab + i * C(NX) * C(NX), A1, sizeof(double) * C(NX) * C(NX)) == 0, "batch A");
            CHECK(C(NR) == 0 || memcmp(Bb + i * C(NX) * C(NR), B1, sizeof(double) * C(NX) * C(NR)) == 0,
                  "batch B");
            CHECK(memcmp(Afb + i * ROWS * C(NX), A_full, sizeof(double) * ROWS * C(NX)) == 0, "batch A_full");
            CHECK(memcmp(qdb + i * C(NQ), qd, sizeof qd[0] * C(NQ)) == 0, "batch qd");
            CHECK(memcmp(udb + i * C(NU), ud, sizeof ud[0] * C(NU)) == 0, "batch ud");
            CHECK(memcmp(cb + 2 * i, c1, sizeof c1) == 0, "batch condition");
            CHECK(memcmp(ub_flags + i * C(NX), flags1, sizeof(int) * C(NX)) == 0, "batch steadiness");
        }
        CHECK(sb[POINTS] != C(OK) && sb[POINTS + 1] != C(OK), "batch: the bad points fail");
        CHECK(status == sb[POINTS], "batch: the first failure's status");
        /* without status: stops at the first failure and returns it */
        free(bw);
        bw = malloc(sizeof *bw);
        if (!bw) return 2;
        CHECK(F(linearize_batch)(N, tb, 1, qb, SQ, ub, SU, rb, SR, NULL, 0, NULL, NULL, 1e-8, Ab, NULL,
                                 NULL, NULL, NULL, NULL, NULL, 0.0, NULL, NULL, bw) == sb[POINTS],
              "batch without status");
        /* the state derivative of the good points, shared parameters by stride 0 */
        status = F(state_derivative_batch)(POINTS, tb, 1, qb, SQ, ub, SU, rb, SR, F(default_parameters), 0,
                                           qdb, udb, sb, bw);
        CHECK(status == C(OK), "state_derivative_batch");
        for (i = 0; i < POINTS; ++i) {
            RENEW();
            CHECK(F(state_derivative)(tb[i], qb + i * SQ, ub + i * SU, rb + i * SR, NULL, qd, ud, base)
                  == C(OK), "state_derivative");
            CHECK(memcmp(qdb + i * C(NQ), qd, sizeof qd[0] * C(NQ)) == 0, "batch state derivative qd");
            CHECK(memcmp(udb + i * C(NU), ud, sizeof ud[0] * C(NU)) == 0, "batch state derivative ud");
        }
        (void)first;
        /* the local form of the same points in rows of NX states (the lane
           code for regular points): each point's as one call gives it */
        {
            const int W = C(NX);
            double *Alb = malloc(sizeof(double) * N * W * W + 1), *Blb = malloc(sizeof(double) * N * W * C(NR) + 1);
            double *Tlb = malloc(sizeof(double) * N * ROWS * W + 1);
            int *rlb = malloc(sizeof(int) * N * 2), *clb = malloc(sizeof(int) * N * (C(NC) + C(NV)) + 1);
            int *flb = malloc(sizeof(int) * N * W + 1);
            static double A2[ROWS * ROWS + 1], B2[ROWS * (C(NR) + 1) + 1], T2[ROWS * ROWS + 1];
            int ranks2[2], chart2[C(NC) + C(NV) + 1], flags2[ROWS + 1];
            if (!Alb || !Blb || !Tlb || !rlb || !clb || !flb) return 2;
            free(bw);
            bw = malloc(sizeof *bw);
            if (!bw) return 2;
            status = F(linearize_local_batch)(N, tb, 1, qb, SQ, ub, SU, rb, SR, NULL, 0, 0.0, 1e-8, Alb,
                                              C(NR) ? Blb : NULL, Tlb, rlb, clb, NULL, W, 1e-9, flb, sb, bw);
            CHECK(status == sb[POINTS], "local batch: the first failure's status");
            for (i = 0; i < N; ++i) {
                int s;
                RENEW();
                s = F(linearize_local)(tb[i], qb + i * SQ, ub + i * SU, rb + i * SR, NULL, 0.0, 1e-8, A2, B2,
                                       T2, ranks2, chart2, NULL, local);
                CHECK(sb[i] == s, "local batch status");
                if (s != C(OK)) continue;
                F(unsteady_states)(base, NULL, A2, T2, 1e-9, flags2);
                CHECK(memcmp(Alb + i * W * W, A2, sizeof(double) * W * W) == 0, "local batch A");
                CHECK(C(NR) == 0 || memcmp(Blb + i * W * C(NR), B2, sizeof(double) * W * C(NR)) == 0,
                      "local batch B");
                CHECK(memcmp(Tlb + i * ROWS * W, T2, sizeof(double) * ROWS * W) == 0, "local batch T");
                CHECK(memcmp(rlb + 2 * i, ranks2, sizeof ranks2) == 0, "local batch ranks");
                CHECK(memcmp(clb + i * (C(NC) + C(NV)), chart2, sizeof(int) * (C(NC) + C(NV))) == 0,
                      "local batch chart");
                CHECK(memcmp(flb + i * W, flags2, sizeof(int) * W) == 0, "local batch steadiness");
            }
            CHECK(F(linearize_local_batch)(N, tb, 1, qb, SQ, ub, SU, rb, SR, NULL, 0, 0.0, 1e-8, Alb, NULL,
                                           Tlb, NULL, NULL, NULL, W - 1, 0.0, NULL, sb, bw) == C(ERR_WIDTH),
                  "local batch: rows too narrow");
            free(Alb); free(Blb); free(Tlb); free(rlb); free(clb); free(flb);
        }
        free(qb); free(ub); free(rb); free(tb); free(Ab); free(Bb); free(Afb); free(qdb); free(udb);
        free(cb); free(sb); free(ub_flags); free(bw);
        printf("batch_points %d\n", N);
    }

    /* the local form: fast path without and with the singular values (the
       same A), the singular values alone, the SVD path (a rank tolerance no
       certificate meets), the descriptor form and the automatic partition */
    {
        static double A_local[ROWS * ROWS + 1], B_local[ROWS * (C(NR) + 1) + 1];
        static double T_local[ROWS * ROWS + 1], A_again[ROWS * ROWS + 1];
        static double E_desc[C(NDESC) * C(NDESC) + 1], A_desc[C(NDESC) * C(NDESC) + 1];
        static double B_desc[C(NDESC) * (C(NR) + 1) + 1];
        double sigma[C(NC) + C(NV) + 1], sigma_alone[C(NC) + C(NV) + 1];
        int ranks[2], ranks_alone[2], dependent_q[C(NC) + 1], dependent_u[C(NV) + 1], nx;
        RENEW();
        status = F(linearize_local)(0.25, q_points[0], u_points[0], r_points[0], NULL, -1.0, 1e-8,
                                    A_local, B_local, T_local, ranks, NULL, NULL, local);
        CHECK(status == C(OK), "linearize_local");
        nx = (C(NQ) - ranks[0]) + (C(NU) - ranks[1]);
        print_vector("local_A", A_local, nx * nx);
        print_vector("local_B", B_local, nx * C(NR));
        print_vector("local_T", T_local, ROWS * nx);
        {   /* on a fresh workspace, never written: valgrind sees a read of
               anything the call itself did not write (e.g. structural zeros) */
            F(local_workspace) *fresh = malloc(sizeof *fresh);
            if (fresh == NULL) return 2;
            status = F(linearize_local)(0.25, q_points[0], u_points[0], r_points[0], NULL, -1.0,
                                        1e-8, A_again, NULL, NULL, ranks_alone, NULL, sigma, fresh);
            free(fresh);
        }
        CHECK(status == C(OK), "linearize_local with sigma");
        CHECK(ranks_alone[0] == ranks[0] && ranks_alone[1] == ranks[1], "ranks with sigma");
        CHECK(memcmp(A_again, A_local, nx * nx * sizeof(double)) == 0, "sigma changed A");
        print_vector("sigma", sigma, C(NC) + C(NV));
        RENEW();
        status = F(constraint_singular_values)(0.25, q_points[0], u_points[0], NULL, -1.0,
                                               ranks_alone, sigma_alone, NULL, NULL, local);
        CHECK(status == C(OK), "constraint_singular_values");
        CHECK(memcmp(sigma_alone, sigma, (C(NC) + C(NV)) * sizeof(double)) == 0, "sigma alone");
        CHECK(ranks_alone[0] == ranks[0] && ranks_alone[1] == ranks[1], "ranks alone");
        status = F(linearize_local)(0.25, q_points[0], u_points[0], r_points[0], NULL, 0.999, 1e-8,
                                    A_local, B_local, T_local, ranks, NULL, sigma, local);
        CHECK(status == C(OK), "linearize_local, SVD path");
        {
            int unsteady[ROWS + 1], count;
            RENEW();
            status = F(linearize_local)(0.25, q_points[0], u_points[0], r_points[0], NULL, -1.0, 1e-8,
                                        A_local, B_local, T_local, ranks, NULL, NULL, local);
            count = F(unsteady_states)(base, NULL, A_local, T_local, 1e-6, unsteady);
            CHECK(status == C(OK) && count >= 0, "unsteady_states after linearize_local");
            RENEW();
            status = F(linearize_descriptor)(0.25, q_points[0], u_points[0], r_points[0], NULL, -1.0,
                                             1e-8, E_desc, A_desc, B_desc, ranks, full);
            CHECK(status == C(OK), "linearize_descriptor");
            count = F(unsteady_states)(base, E_desc, A_desc, NULL, 1e-6, unsteady);
            CHECK(count >= 0, "unsteady_states after linearize_descriptor");
            RENEW();
            status = F(linearize)(0.25, q_points[0], u_points[0], r_points[0], NULL, NULL, NULL, 1e-8,
                                  NULL, NULL, NULL, NULL, NULL, NULL, base);
            count = F(unsteady_states)(base, NULL, NULL, NULL, 1e-6, unsteady);
            CHECK(status == C(OK) && count >= 0, "unsteady_states after linearize");
        }
        RENEW();
        status = F(automatic_partition)(0.25, q_points[0], u_points[0], NULL, -1.0, 1, dependent_q,
                                        dependent_u, ranks, local);
        CHECK(status == C(OK), "automatic_partition");
    }

    /* the constraint maps of the default partition: J_c C_0 = 0 and
       B_v C_2 = 0 (C_0 = P_qi - P_qd K_c, C_2 = P_ui - P_ud K_u) */
    {
        static double J_c[C(NC) * C(NQ) + 1], J_vq[C(NV) * C(NQ) + 1], B_v[C(NV) * C(NU) + 1];
        static double K_c[C(NC) * C(NQI) + 1], K_v[C(NV) * (C(NQ) + C(NUI)) + 1];
        int k, j, l, dependent[C(NQ) + C(NU) + 1];
        RENEW();
        status = F(constraint_maps)(0.25, q_points[0], u_points[0], NULL, NULL, NULL, J_c, J_vq, B_v,
                                    K_c, K_v, base);
        CHECK(status == C(OK), "constraint_maps");
        for (k = 0; k < C(NQ) + C(NU); ++k) dependent[k] = -1;
        for (k = 0; k < C(NC); ++k) dependent[F(default_dependent_q)[k]] = k;
        for (k = 0; k < C(NV); ++k) dependent[C(NQ) + F(default_dependent_u)[k]] = k;
        for (k = 0; k < C(NC); ++k) {   /* row k of J_c C_0, column by independent coordinate */
            int column = 0;
            for (j = 0; j < C(NQ); ++j) {
                double sum;
                if (dependent[j] >= 0) continue;
                sum = J_c[k * C(NQ) + j];
                for (l = 0; l < C(NQ); ++l)
                    if (dependent[l] >= 0) sum -= J_c[k * C(NQ) + l] * K_c[dependent[l] * C(NQI) + column];
                CHECK(fabs(sum) <= 1e-9, "J_c C_0 = 0");
                ++column;
            }
        }
        print_vector("K_c", K_c, C(NC) * C(NQI));
        print_vector("K_v", K_v, C(NV) * (C(NQ) + C(NUI)));
    }

    /* which blocks are finite (all of them here), and the workspace sizes */
    {
        int flags[C(NBLOCKS) + 1], k;
        RENEW();
        status = F(nonfinite_blocks)(0.25, q_points[0], u_points[0], r_points[0], NULL, flags, base);
        CHECK(status == C(OK), "nonfinite_blocks");
        for (k = 0; k < C(NBLOCKS); ++k) CHECK(flags[k] == 0, "a block is not finite");
        CHECK(F(block_names)[C(NBLOCKS)] == NULL, "block names");
        CHECK(F(workspace_size)("linearize") == sizeof(F(workspace)), "workspace_size linearize");
        CHECK(F(workspace_size)("linearize_local") == sizeof(F(local_workspace)), "workspace_size local");
        CHECK(F(workspace_size)("equilibrium") == sizeof(F(full_workspace)), "workspace_size full");
        CHECK(F(workspace_size)("no such function") == 0, "workspace_size unknown");
        CHECK(sizeof(F(workspace)) < sizeof(F(local_workspace)), "the base workspace is smaller");
    }

    /* an equilibrium from the first point with its speeds held */
    {
        double q_eq[C(NQ) + 1], u_eq[C(NU) + 1], residual = -1.0, rounding = -1.0;
        int iterations = -1;
        memcpy(q_eq, q_points[0], sizeof q_eq);
        memcpy(u_eq, u_points[0], sizeof u_eq);
        RENEW();
        status = F(equilibrium)(0.25, q_eq, u_eq, r_points[0], NULL, NULL, NULL, -1.0, 1e-10, 0.5, 30,
                                &iterations, &residual, &rounding, full);
        CHECK(status == C(OK) || status == C(ERR_NO_CONVERGENCE) || status == C(ERR_NO_PROGRESS),
              "equilibrium returns a status of the iteration");
        CHECK(iterations >= 0 && residual >= 0.0 && rounding >= 0.0, "equilibrium's reports");
    }

    /* error paths: each must return its status code, never crash */
    memcpy(q, q_points[1], sizeof q);
    q[0] = NAN;
    CHECK(F(linearize)(0.25, q, u_points[1], r_points[1], NULL, NULL, NULL, 1e-8, serial.A[0],
                       serial.B[0], NULL, NULL, NULL, NULL, base) == C(ERR_NONFINITE_INPUT), "NaN input");
    CHECK(F(linearize)(INFINITY, q_points[1], u_points[1], r_points[1], NULL, NULL, NULL, 1e-8,
                       NULL, NULL, NULL, NULL, NULL, NULL, base) == C(ERR_NONFINITE_INPUT), "Inf time");
    CHECK(F(linearize)(0.25, NULL, u_points[1], NULL, NULL, NULL, NULL, 1e-8, NULL, NULL, NULL, NULL,
                       NULL, NULL, base) == C(ERR_NULL_ARGUMENT), "NULL q");
    CHECK(F(linearize)(0.25, q_points[1], u_points[1], NULL, NULL, NULL, NULL, 1e-8, NULL, NULL, NULL,
                       NULL, NULL, NULL, NULL) == C(ERR_NULL_ARGUMENT), "NULL workspace");
    if (C(NC) > 0) {
        int bad[C(NC) + 1];
        for (i = 0; i < C(NC); ++i) bad[i] = C(NQ);   /* out of range */
        CHECK(F(linearize)(0.25, q_points[1], u_points[1], NULL, NULL, bad, NULL, 1e-8, NULL, NULL,
                           NULL, NULL, NULL, NULL, base) == C(ERR_BAD_PARTITION), "bad partition");
        memcpy(q, q_points[1], sizeof q);
        q[F(default_dependent_q)[0]] += 1e-3;
        CHECK(F(linearize)(0.25, q, u_points[1], NULL, NULL, NULL, NULL, 1e-8, NULL, NULL, NULL, NULL,
                           NULL, NULL, base) == C(ERR_CONFIGURATION_CONSTRAINT), "f_c violated");
    }
    for (i = 0; i <= 13; ++i) CHECK(F(status_message)(i) != NULL, "status message");
    CHECK(strcmp(F(q_names)[0], "") != 0 && F(q_names)[C(NQ)] == NULL, "names");
    free(full);
#undef RENEW
    printf("failures %d\n", failures);
    return failures != 0;
}
