/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* decide: Facts + KernelCaps + PolicySet → Plan. Pure: no I/O, no clock,
 * no allocation; the unit tests and the daemon run the same code. */
#include <fnmatch.h>

#include "decide.h"
#include "util.h"

/* Before 6.10 zoned block devices relied on mq-deadline's zone write
 * locking to keep writes in order; 6.10 moved that into the block layer
 * (zone write plugging), so any scheduler is safe from there on. */
static const unsigned ZONE_WRITE_PLUGGING_VERSION[3] = { 6, 10, 0 };

static const char *const result_names[_RESULT_MAX] = {
        [RESULT_PLANNED] = "planned",
        [RESULT_UNCHANGED] = "unchanged",
        [RESULT_APPLIED] = "applied",
        [RESULT_FAILED] = "failed",
        [RESULT_UNSUPPORTED] = "unsupported",
        [RESULT_RETRY] = "retry",
        [RESULT_NOT_KEPT] = "not-kept",
        [RESULT_OVERRIDDEN] = "overridden",
};

const char *item_result_to_string(ItemResult r) {
        return r < _RESULT_MAX ? result_names[r] : NULL;
}

static bool kernel_cond_holds(const KernelCond *c, const KernelCaps *caps) {
        int cmp = kernel_version_compare(caps->version, c->version);

        switch (c->op) {
        case KOP_LT: return cmp < 0;
        case KOP_LE: return cmp <= 0;
        case KOP_EQ: return cmp == 0;
        case KOP_GE: return cmp >= 0;
        case KOP_GT: return cmp > 0;
        }
        return false;
}

static bool property_matches(char *const *props, const char *cond) {
        const char *eq = strchr(cond, '=');
        size_t klen = (size_t) (eq - cond);

        for (char *const *p = props; p && *p; p++)
                if (strncmp(*p, cond, klen) == 0 && (*p)[klen] == '=' &&
                    fnmatch(eq + 1, *p + klen + 1, 0) == 0)
                        return true;
        return false;
}

/* Bio-based devices (dm, md, NVMe multipath heads) are for the policies
 * that say so, by their class or by a key only a stack has. */
static bool policy_names_the_stack(const PolicyMatch *m) {
        return (m->classes_required & CLASS_BIT(CLASS_BIO_BASED)) || m->dm_uuid_prefixes || m->md_levels ||
               m->nvme_mpath_mask;
}

bool decide_policy_matches(const Policy *p, const DeviceFacts *f, const KernelCaps *caps, const char **why_not) {
        const PolicyMatch *m = &p->match;
        const DeviceTopology *t = &f->topology;
        const char *why = NULL;

        /* a policy written for disks never reaches the stack above them:
         * only one that names it does (read-ahead belongs at the top) */
        if ((f->classes & CLASS_BIT(CLASS_BIO_BASED)) && !policy_names_the_stack(m))
                why = "class (bio-based: only a policy with class = bio-based, dm_uuid_prefix=, md_level= "
                      "or nvme_multipath=)";
        else if ((f->classes & m->classes_required) != m->classes_required)
                why = "class";
        else if (f->classes & m->classes_excluded)
                why = "class (excluded)";
        else if (m->names && !strv_fnmatch(m->names, f->name))
                why = "name";
        else if (m->drivers && !strv_contains(m->drivers, f->driver))
                why = "driver";
        else if (m->models && !strv_fnmatch(m->models, f->model))
                why = "model";
        else if (m->rotational >= 0 && m->rotational != f->rotational)
                why = "rotational";
        else if (m->hidden >= 0 && m->hidden != f->hidden)
                why = "hidden";
        else if (m->zoned_mask && !(m->zoned_mask & (1u << f->zoned)))
                why = "zoned";
        else if (f->hw_queues < m->hwq_min || f->hw_queues > m->hwq_max)
                why = "hw_queues";
        else if (m->stack_mask && !(m->stack_mask & (1u << device_topology_role(t))))
                why = "stack";
        else if (m->dm_uuid_prefixes && !strv_contains(m->dm_uuid_prefixes, t->dm_uuid_prefix))
                why = "dm_uuid_prefix";
        else if (m->md_levels && !strv_contains(m->md_levels, t->md_level))
                why = "md_level";
        else if (m->nvme_mpath_mask && !(m->nvme_mpath_mask & (1u << t->nvme_multipath)))
                why = "nvme_multipath";
        for (unsigned i = 0; !why && i < m->n_kernel; i++)
                if (!kernel_cond_holds(&m->kernel[i], caps))
                        why = "kernel";
        for (char *const *c = m->properties; !why && c && *c; c++)
                if (!property_matches(f->properties, *c))
                        why = "property";
        if (why_not)
                *why_not = why;
        return !why;
}

/* The in-tree schedulers that distributions build as modules (Debian: bfq
 * and kyber). The kernel loads one itself, request_module("%s-iosched"), on
 * the first write of its name to queue/scheduler, so a queue that does not
 * list it yet will still take it; if the module is missing the write fails
 * with EINVAL and apply goes on to the next choice. A queue that lists only
 * none takes no scheduler at all. Nor does one whose list has no current
 * entry: a queue without elevator support reads a bare "none" (bio-based
 * disks on 6.1; BLK_MQ_F_NO_SCHED, null_blk's no_sched=1, until 6.14
 * removed it) and takes any write without effect; its scheduler is "" to
 * a pass, no value a record could keep as found. */
static bool scheduler_available(const DeviceFacts *f, const char *name) {
        static const char *const loadable[] = { "mq-deadline", "kyber", "bfq" };

        if (f->schedulers.current < 0)
                return false;
        if (scheduler_list_has(&f->schedulers, name))
                return true;
        if (f->schedulers.n < 2)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(loadable); i++)
                if (streq(loadable[i], name))
                        return true;
        return false;
}

static bool sched_choice_usable(const SchedChoice *c, const DeviceFacts *f, const KernelCaps *caps,
                                bool zone_locking) {
        if (!scheduler_available(f, c->name))
                return false;
        if (c->dispatch_direct && caps->dispatch_direct != TRISTATE_YES)
                return false;
        return !zone_locking || streq(c->name, "mq-deadline");
}

static bool needs_zone_write_locking(const DeviceFacts *f, const KernelCaps *caps) {
        return f->zoned != ZONED_NONE &&
               kernel_version_compare(caps->version, ZONE_WRITE_PLUGGING_VERSION) < 0;
}

static void plan_scheduler(const DecideInput *in, const SchedChoice *choices, unsigned n,
                           const char *source, PlanItem *item, const char **effective, Plan *plan) {
        bool locking = needs_zone_write_locking(in->facts, in->caps);
        unsigned k = 0;

        _Static_assert(SCHED_CHOICES_MAX <= 32, "fallback_mask has a bit per choice");
        *item = (PlanItem) { .tunable = TUNABLE_SCHEDULER, .source = source };
        plan->choices = choices;
        for (unsigned i = 0; i < n; i++) {
                if (!sched_choice_usable(&choices[i], in->facts, in->caps, locking))
                        continue;
                if (k == 0)
                        (void) sched_choice_format(&choices[i], item->target, sizeof(item->target));
                else
                        plan->fallback_mask |= 1u << i;
                k++;
        }
        if (k == 0 && locking && scheduler_available(in->facts, "mq-deadline")) {
                (void) strscpy(item->target, sizeof(item->target), "mq-deadline");
                plan->reason = "zoned device on a kernel before 6.10: mq-deadline keeps zone writes in order";
                k = 1;
        }
        if (k == 0) {
                (void) sched_choice_format(&choices[0], item->target, sizeof(item->target));
                item->result = RESULT_UNSUPPORTED;
                (void) strscpy(item->error, sizeof(item->error), "no scheduler of the list is usable on this device");
                return;
        }
        *effective = item->target;
}

/* What the matching policies set, layer over layer, and which file set
 * each: a canary's values are told apart by their file (decide_canaries()). */
typedef struct Layers {
        const char *values[TUNABLES_MAX];
        const char *sources[TUNABLES_MAX];      /* the file of each value */
        const SchedChoice *sched;
        unsigned n_sched;
        const char *sched_source;
        const Policy *dynamic_from;
        const Policy *trial_from;
        SchedChoice trial_sched;        /* the trial arm's scheduler, without its depth */
        char trial_nr_requests[16];     /* the trial arm's depth, the value layered */
} Layers;

/* Later files override earlier ones setting by setting, as sysctl.d does.
 * A canary (mode=observe) is a layer only in the preview; otherwise it is
 * named in plan->canary and left out. Its [Dynamic] is never run: a
 * canary says what it would set, not when. */
static void layer_policies(const DecideInput *in, Plan *plan, Layers *l) {
        for (size_t i = 0; in->policies && i < in->policies->n_policies; i++) {
                const Policy *p = in->policies->policies[i];

                if (!decide_policy_matches(p, in->facts, in->caps, NULL))
                        continue;
                if (p->observe)
                        plan->canary = p->name;
                if (p->observe && !in->canaries)
                        continue;
                if (!p->observe && plan->n_matched < MATCHED_MAX)
                        plan->matched[plan->n_matched++] = p->name;
                if (!p->observe)
                        plan->policy = p->name;
                if (p->n_sched > 0) {
                        l->sched = p->sched;
                        l->n_sched = p->n_sched;
                        l->sched_source = p->name;
                }
                for (size_t t = 1; t < n_tunables; t++)
                        if (p->values[t]) {
                                l->values[t] = p->values[t];
                                l->sources[t] = p->name;
                        }
                if (p->dynamic.enabled && !p->observe)
                        l->dynamic_from = p;
                if (p->trial.enabled && !p->observe)
                        l->trial_from = p;
        }
}

/* the busy set is one more layer, above every file's base settings */
static void layer_busy(Plan *plan, Layers *l) {
        const DynamicPolicy *dyn = plan->dynamic;

        plan->busy = true;
        if (dyn->n_busy_sched > 0) {
                l->sched = dyn->busy_sched;
                l->n_sched = dyn->n_busy_sched;
                l->sched_source = plan->dynamic_source;
        }
        for (size_t t = 1; t < n_tunables; t++)
                if (dyn->busy_values[t]) {
                        l->values[t] = dyn->busy_values[t];
                        l->sources[t] = plan->dynamic_source;
                }
}

/* A bio-based queue has no elevator: what only a request queue has is
 * shown unsupported, the rest planned as on any disk. */
static void plan_bio_based(Layers *l, Plan *plan) {
        for (size_t t = 0; t < n_tunables; t++) {
                PlanItem *item;

                if (t == TUNABLE_SCHEDULER ? !l->sched : !l->values[t])
                        continue;
                item = &plan->items[plan->n_items++];
                *item = (PlanItem) { .tunable = (unsigned) t,
                                     .source = t == TUNABLE_SCHEDULER ? l->sched_source : l->sources[t] };
                if (t == TUNABLE_SCHEDULER)
                        (void) sched_choice_format(&l->sched[0], item->target, sizeof(item->target));
                else
                        (void) strscpy(item->target, sizeof(item->target), l->values[t]);
                if (tunables[t].request_based) {
                        item->result = RESULT_UNSUPPORTED;
                        (void) snprintf(item->error, sizeof(item->error), "a bio-based queue has no %s",
                                        t == TUNABLE_SCHEDULER ? "I/O scheduler" : tunables[t].attr);
                }
        }
}

static void plan_items(const DecideInput *in, Layers *l, Plan *plan) {
        const char *effective = device_facts_scheduler(in->facts);
        char effective_buf[SCHED_NAME_MAX];

        if (in->facts->classes & CLASS_BIT(CLASS_BIO_BASED)) {
                plan_bio_based(l, plan);
                return;
        }
        if (l->sched) {
                PlanItem *item = &plan->items[plan->n_items++];

                plan_scheduler(in, l->sched, l->n_sched, l->sched_source, item, &effective, plan);
                /* "mq-deadline+dispatch_direct" sets the tunable unless a policy did. */
                if (item->result != RESULT_UNSUPPORTED && strchr(item->target, '+')) {
                        int dd = tunable_find("mq-deadline", "dispatch_direct");
                        if (!l->values[dd]) {
                                l->values[dd] = "1";
                                l->sources[dd] = l->sched_source;
                        }
                        *strchr(item->target, '+') = 0;
                }
                (void) strscpy(effective_buf, sizeof(effective_buf), effective);
                effective = effective_buf;
        }

        for (size_t t = 1; t < n_tunables; t++) {
                PlanItem *item;

                if (!l->values[t])
                        continue;
                item = &plan->items[plan->n_items++];
                *item = (PlanItem) { .tunable = (unsigned) t, .source = l->sources[t] };
                (void) strscpy(item->target, sizeof(item->target), l->values[t]);
                if (tunables[t].scheduler && !streq(tunables[t].scheduler, effective)) {
                        item->result = RESULT_UNSUPPORTED;
                        snprintf(item->error, sizeof(item->error), "belongs to %s, the device runs %s",
                                 tunables[t].scheduler, *effective ? effective : "no scheduler");
                }
        }
}

/* The trial's arm in force, over every file's choice: one scheduler, no
 * fallback, nothing the plan points to; dispatch_direct as the arm says
 * (plain mq-deadline is 0 where the kernel has it: the arm against
 * mq-deadline+dispatch_direct is that flip); its nr_requests. */
static void layer_trial(const DecideInput *in, Layers *l) {
        const SchedChoice *arm = in->trial_arm;
        int dd = tunable_find("mq-deadline", "dispatch_direct");

        if (arm->name[0]) {
                l->trial_sched = *arm;
                l->trial_sched.nr_requests = 0;
                l->sched = &l->trial_sched;
                l->n_sched = 1;
                l->sched_source = in->trial_source;
                if (arm->dispatch_direct ||
                    (streq(arm->name, "mq-deadline") && in->caps && in->caps->dispatch_direct == TRISTATE_YES)) {
                        l->values[dd] = arm->dispatch_direct ? "1" : "0";
                        l->sources[dd] = in->trial_source;
                }
        }
        if (arm->nr_requests) {
                (void) snprintf(l->trial_nr_requests, sizeof(l->trial_nr_requests), "%u", arm->nr_requests);
                l->values[TUNABLE_NR_REQUESTS] = l->trial_nr_requests;
                l->sources[TUNABLE_NR_REQUESTS] = in->trial_source;
        }
}

void decide(const DecideInput *in, Plan *plan) {
        bool bio_based = in->facts->classes & CLASS_BIT(CLASS_BIO_BASED);
        Layers l = {};

        *plan = (Plan) { .items = plan->items, .matched = plan->matched };
        if (in->excluded) {
                plan->reason = "excluded by the daemon configuration";
                return;
        }
        plan->managed = true;
        layer_policies(in, plan, &l);
        if (l.dynamic_from) {
                plan->dynamic = &l.dynamic_from->dynamic;
                plan->dynamic_source = l.dynamic_from->name;
        }
        if (l.trial_from) {
                plan->trial = &l.trial_from->trial;
                plan->trial_source = l.trial_from->name;
        }
        /* a canary's name points into the set too: the plan holds it */
        if (plan->policy || plan->canary)
                plan->set = in->policies;
        if (bio_based && !plan->policy && !plan->canary) {
                /* as before policies could name the class: left alone */
                *plan = (Plan) { .items = plan->items, .matched = plan->matched,
                                 .reason = "bio-based: the device has no I/O scheduler" };
                return;
        }
        if (bio_based)
                plan->reason = "bio-based: no I/O scheduler, only the settings a bio-based queue has";
        if (!plan->policy && !(in->canaries && plan->canary)) {
                plan->reason = plan->canary ? "only a canary (mode=observe) matches: left as the kernel set it"
                                            : "no policy matches: left as the kernel set it";
                return;
        }
        if (in->busy && plan->dynamic)
                layer_busy(plan, &l);
        if (in->trial_arm && !bio_based)
                layer_trial(in, &l);
        plan_items(in, &l, plan);
        if (in->trial_arm && !bio_based)
                plan->choices = NULL;
}

/* The same setting to a reader: the same value, taken or not. */
static bool item_same(const PlanItem *a, const PlanItem *b) {
        return streq(a->target, b->target) && (a->result == RESULT_UNSUPPORTED) == (b->result == RESULT_UNSUPPORTED);
}

unsigned decide_canaries(const DecideInput *in, const Plan *enforced, Plan *preview, PlanItem *ret) {
        DecideInput with = *in;
        unsigned n = 0;

        if (!enforced->canary)
                return 0;
        with.canaries = true;
        decide(&with, preview);
        /* whatever differs is the canaries' doing: their own values, and
         * what those bring along (a scheduler's tunables taken or left) */
        for (unsigned i = 0; i < preview->n_items; i++) {
                const PlanItem *it = &preview->items[i];
                const PlanItem *now = plan_find(enforced, it->tunable);

                if (now && item_same(now, it))
                        continue;
                ret[n] = *it;
                if (ret[n].result != RESULT_UNSUPPORTED)
                        ret[n].result = RESULT_PLANNED;
                n++;
        }
        /* and what they drop (dispatch_direct, when a canary's scheduler is
         * plain mq-deadline): put back to what was found */
        for (unsigned i = 0; i < enforced->n_items; i++) {
                const PlanItem *now = &enforced->items[i];

                if (now->result == RESULT_UNSUPPORTED || plan_find(preview, now->tunable))
                        continue;
                ret[n] = (PlanItem) { .tunable = now->tunable, .result = RESULT_PLANNED, .source = enforced->canary };
                (void) strscpy(ret[n].error, sizeof(ret[n].error), CANARY_DROPS);
                n++;
        }
        return n;
}

const PlanItem *plan_find(const Plan *p, unsigned tunable) {
        for (unsigned i = 0; i < p->n_items; i++)
                if (p->items[i].tunable == tunable)
                        return &p->items[i];
        return NULL;
}
