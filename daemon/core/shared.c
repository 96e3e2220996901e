/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What devices share through the intern table: facts, plans and their
 * pairs. Equal
 * means equal to a reader: the same texts, the same pointers into the
 * same policy set, which a plan's copy holds a reference on. */
#include <stdlib.h>

#include "facts.h"
#include "intern.h"
#include "plan.h"
#include "policy-set.h"
#include "shared.h"
#include "util.h"

static uint64_t hash_ptr(uint64_t h, const void *p) {
        return intern_hash_u64(h, (uintptr_t) p);
}

static uint64_t hash_numbers(const unsigned *v, size_t n) {
        uint64_t h = INTERN_HASH_INIT;

        for (size_t i = 0; i < n; i++)
                h = intern_hash_u64(h, v[i]);
        return h;
}

static uint64_t hash_str(uint64_t h, const char *s) {
        return intern_hash_bytes(h, s, strlen(s) + 1);
}

/* The identity (name, number, media, properties, the stack's names) is
 * the device's own: the hash and the comparison leave it out, the copy
 * has it blank. The topology's counts and kinds are shared: the disks of
 * one array or one map's paths alike have the same. */
static uint64_t facts_hash(const void *value) {
        const DeviceFacts *f = value;
        const DeviceTopology *t = &f->topology;
        unsigned head[] = { f->hw_queues, f->poll_queues, f->nr_requests, f->rotational, f->hidden,
                            f->zoned, f->classes, f->schedulers.n, (unsigned) f->schedulers.current,
                            t->n_holders, t->n_slaves, t->md_raid_disks, t->nvme_multipath };
        uint64_t h = hash_numbers(head, ELEMENTSOF(head));

        h = hash_str(hash_str(hash_str(h, f->driver), f->subsystem), f->model);
        h = hash_str(hash_str(h, t->dm_uuid_prefix), t->md_level);
        return intern_hash_bytes(h, f->schedulers.names, scheduler_list_bytes(&f->schedulers));
}

static bool facts_equal(const void *va, const void *vb) {
        const DeviceFacts *a = va, *b = vb;

        return a->hw_queues == b->hw_queues && a->poll_queues == b->poll_queues &&
               a->nr_requests == b->nr_requests && a->rotational == b->rotational && a->hidden == b->hidden &&
               a->zoned == b->zoned && a->classes == b->classes && streq(a->driver, b->driver) &&
               streq(a->subsystem, b->subsystem) && streq(a->model, b->model) &&
               scheduler_list_equal(&a->schedulers, &b->schedulers) &&
               device_topology_equal(&a->topology, &b->topology);
}

static void *facts_dup(const void *value) {
        DeviceFacts *f = malloc(sizeof(DeviceFacts));

        if (!f)
                return NULL;
        *f = *(const DeviceFacts *) value;
        f->name[0] = 0;
        f->major = f->minor = 0;
        f->diskseq = 0;
        f->queue_id = 0;
        f->properties = NULL;
        f->stack = NULL;
        return f;
}

const InternType facts_intern_type = {
        .hash = facts_hash,
        .equal = facts_equal,
        .dup = facts_dup,
        .free = free,
};

static uint64_t plan_hash(const void *value) {
        const Plan *p = value;
        unsigned head[] = { p->n_matched, p->n_items, p->fallback_mask, p->managed, p->busy };
        uint64_t h = hash_numbers(head, ELEMENTSOF(head));

        h = hash_ptr(h, p->set);
        h = hash_ptr(h, p->reason);
        h = hash_ptr(h, p->policy);
        h = hash_ptr(h, p->canary);
        h = hash_ptr(h, p->dynamic);
        h = hash_ptr(h, p->trial);
        for (unsigned i = 0; i < p->n_matched; i++)
                h = hash_ptr(h, p->matched[i]);
        for (unsigned i = 0; i < p->n_items; i++) {
                const PlanItem *it = &p->items[i];
                h = intern_hash_u64(intern_hash_u64(h, it->tunable), it->result);
                h = hash_str(hash_str(h, it->target), it->current);
        }
        return h;
}

static bool plan_item_equal(const PlanItem *a, const PlanItem *b) {
        return a->tunable == b->tunable && a->result == b->result && a->source == b->source &&
               streq(a->target, b->target) && streq(a->before, b->before) &&
               streq(a->current, b->current) && streq(a->error, b->error);
}

static bool plan_equal(const void *va, const void *vb) {
        const Plan *a = va, *b = vb;

        if (a->set != b->set || a->reason != b->reason || a->policy != b->policy || a->canary != b->canary ||
            a->choices != b->choices ||
            a->dynamic != b->dynamic || a->dynamic_source != b->dynamic_source ||
            a->trial != b->trial || a->trial_source != b->trial_source ||
            a->n_matched != b->n_matched || a->n_items != b->n_items ||
            a->fallback_mask != b->fallback_mask || a->managed != b->managed || a->busy != b->busy)
                return false;
        for (unsigned i = 0; i < a->n_matched; i++)
                if (a->matched[i] != b->matched[i])
                        return false;
        for (unsigned i = 0; i < a->n_items; i++)
                if (!plan_item_equal(&a->items[i], &b->items[i]))
                        return false;
        return true;
}

/* One block: the Plan, its items, then the names of the matched policies. */
static void *plan_dup(const void *value) {
        const Plan *src = value;
        Plan *p = malloc(sizeof(Plan) + sizeof(PlanItem) * src->n_items + sizeof(const char *) * src->n_matched);

        if (!p)
                return NULL;
        *p = *src;
        p->items = (PlanItem *) (p + 1);
        p->matched = (const char **) (p->items + src->n_items);
        /* an undecided or unmanaged plan has neither (NULL: no memcpy) */
        if (src->n_items)
                memcpy(p->items, src->items, sizeof(PlanItem) * src->n_items);
        if (src->n_matched)
                memcpy(p->matched, src->matched, sizeof(const char *) * src->n_matched);
        policy_set_ref(p->set);
        return p;
}

static void plan_free(void *value) {
        Plan *p = value;

        policy_set_unref(p->set);
        free(p);
}

const InternType plan_intern_type = {
        .hash = plan_hash,
        .equal = plan_equal,
        .dup = plan_dup,
        .free = plan_free,
};

static uint64_t kind_hash(const void *value) {
        const DeviceKind *k = value;

        return hash_ptr(hash_ptr(INTERN_HASH_INIT, k->facts), k->plan);
}

static bool kind_equal(const void *a, const void *b) {
        const DeviceKind *x = a, *y = b;

        return x->facts == y->facts && x->plan == y->plan;
}

static void *kind_dup(const void *value) {
        DeviceKind *k = malloc(sizeof(DeviceKind));

        if (k)
                *k = *(const DeviceKind *) value;
        return k;
}

const InternType kind_intern_type = {
        .hash = kind_hash,
        .equal = kind_equal,
        .dup = kind_dup,
        .free = free,
};
