/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* trial: the statistics core of trying a candidate setting on a device's
 * own traffic (issue #28). Pure: two diskstats samples → a window, windows
 * → a verdict; no I/O, no clock, no allocation. trial-run.c puts it in
 * time, trial-device.c runs a device's candidates, loop/device-trial.c in
 * the tick. docs/trials.md has the design and the formulas. */

#include <stdbool.h>
#include <stdint.h>

#include "sample.h"
#include "string-table.h"

/* The most pairs a trial keeps order bits for: one uint64_t. */
#define TRIAL_PAIRS_MAX 64

/* One window of one arm, from two cumulative samples of the device. */
typedef struct TrialWindow {
        bool valid;             /* false: a counter went backwards (wrap, the device re-added) */
        uint64_t ios;           /* completed reads and writes */
        uint64_t bytes;         /* read and written */
        uint64_t merges;
        uint64_t io_ticks;      /* ms with I/O in flight */
        uint64_t time_in_queue; /* ms, weighted by the requests in flight */
        double duration_ms;
        /* derived; 0 when what they divide by is 0 */
        double throughput;      /* bytes per second */
        double busy_per_byte;   /* ms busy per MiB moved: the primary metric, lower is better */
        double ms_per_request;  /* time_in_queue / ios: the guardrail's second metric */
} TrialWindow;

/* 0, or -EINVAL for two samples of different devices or a duration not
 * above 0 (the caller's mistakes). Counters that went backwards are the
 * world's: a window with valid = false. */
int trial_window_from_samples(const DiskStat *before, const DiskStat *after, double duration_ms,
                              TrialWindow *ret);

typedef struct TrialConfig {
        double confidence;      /* of each decision over the whole trial, (0.5, 1); 0.95 */
        double min_gain;        /* the margin a candidate must beat the incumbent by; 0.05 = 5% */
        unsigned min_pairs;     /* the first look; the next at each doubling; 4 */
        unsigned max_pairs;     /* the last look, at most TRIAL_PAIRS_MAX; 64 */
        unsigned max_windows;   /* windows fed, counted or not, before giving up; 256 */
        uint64_t min_ios;       /* a window with fewer requests does not count; 100 */
        double min_busy;        /* nor one busy for less of its duration; 0.05 */
        double max_regress;     /* a candidate window this much worse than the incumbent's aborts; 1.5 */
        double max_latency_regress; /* the same for ms_per_request; 0: not checked; 1.5 */
} TrialConfig;

void trial_config_default(TrialConfig *ret);
/* 0 or -EINVAL, for trial_state_init(). */
int trial_config_check(const TrialConfig *c);

/* Whether a window has the I/O to count: valid, min_ios requests, busy
 * min_busy of its duration, a metric above 0. An idle device never decides. */
bool trial_window_counts(const TrialWindow *w, const TrialConfig *c);

/* Whether a candidate window is worse than the incumbent's beyond the
 * bounds; the reason, with the values, in reason when it is. */
bool trial_window_regresses(const TrialWindow *candidate, const TrialWindow *incumbent, const TrialConfig *c,
                            char *reason, size_t size);

/* Pure: the order of n pairs (n <= TRIAL_PAIRS_MAX) from seed, bit i set
 * when pair i runs the candidate first. Balanced in each block of 4 pairs
 * (two of each order), so every look (a multiple of 4 with the default
 * min_pairs) sees as many of each: a carry-over from one window into the
 * next cancels. The same seed, the same order. */
uint64_t trial_schedule(uint64_t seed, unsigned n);

/* The p quantile (0 < p < 1) of Student's t with df >= 1 degrees of
 * freedom: the exact distribution, inverted by bisection (a relative
 * error under 1e-12). */
double trial_t_quantile(double p, unsigned df);

typedef enum TrialVerdict {
        TRIAL_UNDECIDED,        /* still collecting */
        TRIAL_CANDIDATE_WINS,   /* better by more than min_gain, with confidence */
        TRIAL_INCUMBENT,        /* not better by min_gain, with confidence */
        TRIAL_EQUAL,            /* within min_gain either way, with confidence: the cheaper is kept */
        TRIAL_INCONCLUSIVE,     /* max_pairs or max_windows reached: the incumbent is kept */
        TRIAL_ABORTED,          /* a candidate window regressed beyond the bound */
        _TRIAL_VERDICT_MAX,
} TrialVerdict;

DECLARE_STRING_TABLE(trial_verdict, TrialVerdict);

typedef enum TrialAction {
        TRIAL_RUN_INCUMBENT,
        TRIAL_RUN_CANDIDATE,
        TRIAL_DECIDED,          /* trial_result() says what to keep */
        TRIAL_STOP,             /* aborted: put the incumbent back now */
} TrialAction;

/* What explain shows. The ratio is the incumbent's metric over the
 * candidate's: above 1, the candidate moves a byte in less busy time. */
typedef struct TrialResult {
        TrialVerdict verdict;
        bool keep_candidate;
        unsigned pairs;         /* counted */
        unsigned windows;       /* fed */
        double ratio;           /* the estimate, exp(mean log-ratio); 1 before a pair */
        /* its interval at the last look, each side at that look's share of
         * 1 - confidence; 0 and +inf before one */
        double ratio_lo, ratio_hi;
        char reason[160];
} TrialResult;

/* Everything a trial needs, fixed size: the order, running moments of the
 * pairs' log-ratios (Welford), the half of a pair waiting for its other
 * half, the last incumbent window for the guardrail. */
typedef struct TrialState {
        TrialConfig config;
        uint64_t order;
        bool candidate_cheaper;
        unsigned pairs, windows;
        unsigned last_look, next_look;  /* pairs */
        bool have_half;         /* the pair's first window is in half */
        TrialWindow half;
        bool have_incumbent;
        TrialWindow last_incumbent;
        double mean, m2;        /* of the log-ratios log(incumbent / candidate) */
        TrialResult result;
} TrialState;

/* -EINVAL for a bad config. candidate_cheaper: the candidate costs less
 * (a simpler scheduler, less memory), so it is kept when the two are equal. */
int trial_state_init(TrialState *s, const TrialConfig *c, uint64_t seed, bool candidate_cheaper);
/* What to run now: the first window's arm after init. */
TrialAction trial_next(const TrialState *s);
/* The window of the arm trial_next() asked for; what to run next. After
 * DECIDED or STOP nothing changes. */
TrialAction trial_feed(TrialState *s, const TrialWindow *w);
const TrialResult *trial_result(const TrialState *s);
