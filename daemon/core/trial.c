/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A switchback trial: the workload is not ours to control, so windows of
 * the incumbent and the candidate alternate in pairs of neighbours, and
 * what is compared is each pair's log-ratio of busy time per byte moved,
 * never averages over an hour in which the load itself changed. The
 * decision is a t-bound on the mean log-ratio against the margin, at a few
 * looks with the error spent over them (Bonferroni), so that looking
 * early does not spend more than the stated confidence. docs/trials.md
 * has the argument and the formulas. */
#include <math.h>

#include "trial.h"
#include "util.h"

static const char *const trial_verdict_names[_TRIAL_VERDICT_MAX] = {
        [TRIAL_UNDECIDED] = "undecided",
        [TRIAL_CANDIDATE_WINS] = "candidate-wins",
        [TRIAL_INCUMBENT] = "incumbent",
        [TRIAL_EQUAL] = "equal",
        [TRIAL_INCONCLUSIVE] = "inconclusive",
        [TRIAL_ABORTED] = "aborted",
};

DEFINE_STRING_TABLE(trial_verdict, TrialVerdict, trial_verdict_names, _TRIAL_VERDICT_MAX)

#define MIB (1024.0 * 1024.0)

static double ratio_or_zero(double a, double b) {
        return b > 0 ? a / b : 0;
}

int trial_window_from_samples(const DiskStat *before, const DiskStat *after, double duration_ms,
                              TrialWindow *ret) {
        const DiskCounters *a = &before->c, *b = &after->c;

        if (before->major != after->major || before->minor != after->minor || !(duration_ms > 0))
                return -EINVAL;
        *ret = (TrialWindow) { .duration_ms = duration_ms };
        if (disk_counters_backwards(a, b))
                return 0;       /* a wrap or a device re-added: this window tells nothing */
        *ret = (TrialWindow) {
                .valid = true,
                .ios = b->rd_ios - a->rd_ios + b->wr_ios - a->wr_ios,
                /* sectors are 512 bytes whatever the device's block size */
                .bytes = (b->rd_sectors - a->rd_sectors + b->wr_sectors - a->wr_sectors) * 512,
                .merges = b->rd_merges - a->rd_merges + b->wr_merges - a->wr_merges,
                .io_ticks = b->io_ticks - a->io_ticks,
                .time_in_queue = b->time_in_queue - a->time_in_queue,
                .duration_ms = duration_ms,
        };
        ret->throughput = (double) ret->bytes / (duration_ms / 1000.0);
        /* Per byte, not per request: a setting that merges more makes
         * fewer, larger requests of the same bytes, and a per-request
         * metric would count the merging against it. */
        ret->busy_per_byte = ratio_or_zero((double) ret->io_ticks, (double) ret->bytes / MIB);
        ret->ms_per_request = ratio_or_zero((double) ret->time_in_queue, (double) ret->ios);
        return 0;
}

void trial_config_default(TrialConfig *ret) {
        *ret = (TrialConfig) {
                .confidence = 0.95,
                .min_gain = 0.05,
                .min_pairs = 4,
                .max_pairs = TRIAL_PAIRS_MAX,
                .max_windows = 4 * TRIAL_PAIRS_MAX,
                .min_ios = 100,
                .min_busy = 0.05,
                .max_regress = 1.5,
                .max_latency_regress = 1.5,
        };
}

int trial_config_check(const TrialConfig *c) {
        /* written so that a NaN fails each */
        if (!(c->confidence > 0.5 && c->confidence < 1) || !(c->min_gain >= 0 && c->min_gain < 10) ||
            !(c->min_busy >= 0 && c->min_busy <= 1) || !(c->max_regress > 1 && c->max_regress < INFINITY) ||
            !(c->max_latency_regress == 0 || (c->max_latency_regress > 1 && c->max_latency_regress < INFINITY)))
                return -EINVAL;
        /* a t-bound needs 2 pairs; every pair needs its two windows */
        if (c->min_pairs < 2 || c->min_pairs > c->max_pairs || c->max_pairs > TRIAL_PAIRS_MAX ||
            c->max_windows < 2 * c->max_pairs)
                return -EINVAL;
        return 0;
}

bool trial_window_counts(const TrialWindow *w, const TrialConfig *c) {
        return w->valid && w->ios >= c->min_ios && w->ios > 0 &&
               (double) w->io_ticks >= c->min_busy * w->duration_ms && w->busy_per_byte > 0 &&
               isfinite(w->busy_per_byte);
}

/* Whether new is worse than old by more than bound, with the text. */
static bool worse_by(const char *what, double new, double old, double bound, char *reason, size_t size) {
        if (!(old > 0) || !(new > old * bound))
                return false;
        if (size > 0)
                snprintf(reason, size, "%s %.3g is %.2fx the incumbent's %.3g, beyond the bound of %.2fx", what,
                         new, new / old, old, bound);
        return true;
}

bool trial_window_regresses(const TrialWindow *candidate, const TrialWindow *incumbent, const TrialConfig *c,
                            char *reason, size_t size) {
        if (worse_by("busy ms per MiB", candidate->busy_per_byte, incumbent->busy_per_byte, c->max_regress, reason,
                     size))
                return true;
        /* Time per request is the latency an application sees only where
         * both arms move the same bytes (an open loop: a fixed rate). In a
         * closed loop (N requests outstanding) each waits N / throughput
         * (Little), so a candidate moving more bytes a second serves them
         * sooner whatever time_in_queue says: on a saturated queue a
         * request waits for a driver tag before it is counted under none,
         * in the scheduler and counted under one (scsi_debug with 8 tags
         * on 6.12: 2.2 ms a request under none, 3.8 under mq-deadline,
         * which moved 2.4 times the bytes; tests/vm/trialtest.py). */
        if (candidate->throughput > incumbent->throughput * (1 + c->min_gain))
                return false;
        return c->max_latency_regress > 0 &&
               worse_by("ms per request", candidate->ms_per_request, incumbent->ms_per_request,
                        c->max_latency_regress, reason, size);
}

static uint64_t splitmix64(uint64_t *x) {
        uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

uint64_t trial_schedule(uint64_t seed, unsigned n) {
        /* the six orders of a block of 4 pairs with two of each way round */
        static const uint8_t blocks[6] = { 0x3, 0x5, 0x6, 0x9, 0xa, 0xc };
        uint64_t order = 0, x = seed;

        if (n > TRIAL_PAIRS_MAX)
                n = TRIAL_PAIRS_MAX;
        for (unsigned i = 0; i < n; i += 4)
                order |= (uint64_t) blocks[splitmix64(&x) % 6] << i;
        return n < 64 ? order & ((UINT64_C(1) << n) - 1) : order;
}

/* P(|T| < sqrt(df) tan(theta)) for T of Student's t with df degrees of
 * freedom: the finite sums of Abramowitz & Stegun 26.7.3 (odd df) and
 * 26.7.4 (even df), exact for the integer df a trial has. */
static double t_central(double theta, unsigned df) {
        double c = cos(theta), c2 = c * c, term, sum;

        if (df % 2 == 0) {
                term = sum = 1;
                for (unsigned k = 2; k + 2 <= df; k += 2)
                        sum += (term *= c2 * (k - 1) / k);
                return sin(theta) * sum;
        }
        if (df == 1)
                return 2 * theta / M_PI;
        term = sum = c;
        for (unsigned k = 3; k + 2 <= df; k += 2)
                sum += (term *= c2 * (k - 1) / k);
        return 2 / M_PI * (theta + sin(theta) * sum);
}

double trial_t_quantile(double p, unsigned df) {
        double lo = 0, hi = M_PI / 2, want;

        assert(p > 0 && p < 1 && df >= 1);
        if (p < 0.5)
                return -trial_t_quantile(1 - p, df);
        /* t_central() rises with theta in [0, pi/2): bisect on the angle,
         * bounded where t is not */
        want = 2 * p - 1;
        for (int i = 0; i < 64; i++) {
                double mid = (lo + hi) / 2;
                if (t_central(mid, df) < want)
                        lo = mid;
                else
                        hi = mid;
        }
        return sqrt((double) df) * tan((lo + hi) / 2);
}

int trial_state_init(TrialState *s, const TrialConfig *c, uint64_t seed, bool candidate_cheaper) {
        if (trial_config_check(c) < 0)
                return -EINVAL;
        *s = (TrialState) {
                .config = *c,
                .order = trial_schedule(seed, c->max_pairs),
                .candidate_cheaper = candidate_cheaper,
                .next_look = c->min_pairs,
                .result = { .verdict = TRIAL_UNDECIDED, .ratio = 1, .ratio_lo = 0, .ratio_hi = INFINITY },
        };
        return 0;
}

static bool trial_done(const TrialState *s) {
        return s->result.verdict != TRIAL_UNDECIDED;
}

static bool arm_is_candidate(const TrialState *s) {
        /* the look at max_pairs ends a trial: never past the order's bits */
        bool candidate_first = s->pairs < TRIAL_PAIRS_MAX && (s->order >> s->pairs & 1);

        return s->have_half ? !candidate_first : candidate_first;
}

TrialAction trial_next(const TrialState *s) {
        if (s->result.verdict == TRIAL_ABORTED)
                return TRIAL_STOP;
        if (trial_done(s))
                return TRIAL_DECIDED;
        return arm_is_candidate(s) ? TRIAL_RUN_CANDIDATE : TRIAL_RUN_INCUMBENT;
}

const TrialResult *trial_result(const TrialState *s) {
        return &s->result;
}

static TrialAction trial_end(TrialState *s, TrialVerdict v, bool keep_candidate) {
        s->result.verdict = v;
        s->result.keep_candidate = keep_candidate;
        return trial_next(s);
}

/* The next window, unless max_windows were fed: an idle or erratic
 * device gives up there, keeping the incumbent, rather than never. */
static TrialAction trial_continue(TrialState *s) {
        if (s->windows < s->config.max_windows)
                return trial_next(s);
        snprintf(s->result.reason, sizeof(s->result.reason),
                 "%u windows fed, %u pairs counted: not decided, the incumbent is kept", s->windows, s->pairs);
        return trial_end(s, TRIAL_INCONCLUSIVE, false);
}

/* The verdict of the bound [lo, hi] on the mean log-ratio against the
 * margin d = log(1 + min_gain), or UNDECIDED. A cheaper candidate is kept
 * when it is shown equal; against a dearer one, equal keeps the incumbent. */
static TrialVerdict verdict_of(double lo, double hi, double d, bool candidate_cheaper) {
        if (lo > d)
                return TRIAL_CANDIDATE_WINS;
        if (lo > -d && hi < d)
                return TRIAL_EQUAL;
        /* not better by the margin; a cheaper one is waited for until it
         * is shown equal, or worse beyond the margin */
        if (hi < (candidate_cheaper ? -d : d))
                return TRIAL_INCUMBENT;
        return TRIAL_UNDECIDED;
}

static const char *verdict_text(TrialVerdict v) {
        switch (v) {
        case TRIAL_CANDIDATE_WINS: return "better than the margin";
        case TRIAL_EQUAL: return "within the margin either way";
        case TRIAL_INCUMBENT: return "not better by the margin";
        default: return "not decided";
        }
}

/* At a look: the bound, each side at the share of 1 - confidence that
 * the pairs since the last look are of max_pairs (a linear spending
 * function, taken with Bonferroni: the shares add up to 1 - confidence),
 * so that no decision of either kind is wrong more often than
 * 1 - confidence over the whole trial, at whichever look it is made. The
 * first looks, on few pairs, spend little: a t-bound on 4 pairs is where
 * an unlucky small spread or a heavy tail would fool it. */
static TrialAction trial_look(TrialState *s) {
        const TrialConfig *c = &s->config;
        TrialResult *r = &s->result;
        double alpha = (1 - c->confidence) * (s->pairs - s->last_look) / c->max_pairs;
        double se = sqrt(fmax(s->m2, 0) / (s->pairs - 1) / s->pairs);
        double q = trial_t_quantile(1 - alpha, s->pairs - 1), d = log1p(c->min_gain);
        double lo = s->mean - q * se, hi = s->mean + q * se;
        TrialVerdict v = verdict_of(lo, hi, d, s->candidate_cheaper);

        r->ratio_lo = exp(lo);
        r->ratio_hi = exp(hi);
        if (v == TRIAL_UNDECIDED && s->pairs >= c->max_pairs)
                v = TRIAL_INCONCLUSIVE;
        snprintf(r->reason, sizeof(r->reason),
                 "busy per byte %.3fx the candidate's (%.3fx-%.3fx, %.2f%% at this look) over %u pairs: %s of %.0f%%",
                 r->ratio, r->ratio_lo, r->ratio_hi, (1 - 2 * alpha) * 100, s->pairs, verdict_text(v),
                 c->min_gain * 100);
        s->last_look = s->pairs;
        s->next_look = s->next_look * 2 < c->max_pairs ? s->next_look * 2 : c->max_pairs;
        if (v == TRIAL_UNDECIDED)
                return trial_continue(s);
        return trial_end(s, v, v == TRIAL_CANDIDATE_WINS || (v == TRIAL_EQUAL && s->candidate_cheaper));
}

static TrialAction trial_abort(TrialState *s, const char *why) {
        snprintf(s->result.reason, sizeof(s->result.reason), "aborted after %u pairs: %s", s->pairs, why);
        return trial_end(s, TRIAL_ABORTED, false);
}

/* A pair done: log(incumbent / candidate) into the running moments. */
static TrialAction trial_pair(TrialState *s, const TrialWindow *incumbent, const TrialWindow *candidate) {
        double x = log(incumbent->busy_per_byte / candidate->busy_per_byte), delta;

        s->pairs++;
        delta = x - s->mean;
        s->mean += delta / s->pairs;
        s->m2 += delta * (x - s->mean);
        s->result.pairs = s->pairs;
        s->result.ratio = exp(s->mean);
        if (s->pairs >= s->next_look)
                return trial_look(s);
        return trial_continue(s);
}

/* A window that does not count: the pair starts again, since a pair is
 * two neighbouring windows, and one with a gap between is not; and the
 * guardrail waits for an incumbent window after the gap, since the load
 * before it is not a neighbour's either. */
static TrialAction trial_skip(TrialState *s) {
        s->have_half = false;
        s->have_incumbent = false;
        return trial_continue(s);
}

TrialAction trial_feed(TrialState *s, const TrialWindow *w) {
        char why[128];
        bool candidate;

        if (trial_done(s))
                return trial_next(s);
        candidate = arm_is_candidate(s);
        s->windows++;
        s->result.windows = s->windows;
        if (!trial_window_counts(w, &s->config))
                return trial_skip(s);
        /* the guardrail against the neighbouring incumbent window, before
         * or after: a candidate first in its pair is checked again when
         * the incumbent after it comes */
        if (candidate && s->have_incumbent &&
            trial_window_regresses(w, &s->last_incumbent, &s->config, why, sizeof(why)))
                return trial_abort(s, why);
        if (!candidate) {
                if (s->have_half && trial_window_regresses(&s->half, w, &s->config, why, sizeof(why)))
                        return trial_abort(s, why);
                s->last_incumbent = *w;
                s->have_incumbent = true;
        }
        if (!s->have_half) {
                s->half = *w;
                s->have_half = true;
                return trial_continue(s);
        }
        s->have_half = false;
        if (candidate)
                return trial_pair(s, &s->half, w);
        return trial_pair(s, w, &s->half);
}
