/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which of the other writers apply to one disk (their conditions against
 * what is known of it), which of them most likely wrote the value it has,
 * and how each is told to people. */
#include <fnmatch.h>

#include "conflicts-match.h"
#include "conflicts-udev.h"
#include "tunables.h"
#include "util.h"

/* tuned's DeviceMatcher: globs separated by white space or commas, '!'
 * negates; no positive rule means every device. */
static bool tuned_devices_match(const char *rules, const char *name) {
        _cleanup_free_ char *copy = strdup(rules);
        bool positive = false, match = false;
        char *save = NULL;

        if (!copy)
                return false;
        for (char *w = strtok_r(copy, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
                if (w[0] == '!') {
                        if (fnmatch(w + 1, name, 0) == 0)
                                return false;
                        continue;
                }
                positive = true;
                match = match || fnmatch(w, name, 0) == 0;
        }
        return !positive || match;
}

static ConflictMatch bool_match(bool m, RuleOp op) {
        return m == (op == RULE_OP_MATCH) ? CONFLICT_MATCH_YES : CONFLICT_MATCH_NO;
}

static ConflictMatch condition_eval(const RuleToken *t, const ConflictDevice *dev) {
        char buf[256];

        if (streq(t->key, "KERNEL"))
                return bool_match(udev_pattern_match(t->value, dev->name), t->op);
        if (streq(t->key, "SUBSYSTEM"))
                return bool_match(udev_pattern_match(t->value, "block"), t->op);
        if (streq(t->key, "ACTION")) {
                /* the rule writes at add and change; remove-only rules never do */
                bool add = udev_pattern_match(t->value, "add"), change = udev_pattern_match(t->value, "change");

                if (t->op == RULE_OP_MATCH)
                        return add || change ? CONFLICT_MATCH_YES : CONFLICT_MATCH_NO;
                return add && change ? CONFLICT_MATCH_NO : CONFLICT_MATCH_YES;
        }
        if (streq(t->key, "ENV") && t->attr && streq(t->attr, "DEVTYPE"))
                return bool_match(udev_pattern_match(t->value, "disk"), t->op);
        if (streq(t->key, "ENV") && t->attr && dev->read_env) {
                int r = dev->read_env(dev->userdata, t->attr, buf, sizeof(buf));

                if (r == -ENOENT)
                        buf[0] = 0;
                if (r >= 0 || r == -ENOENT)
                        return bool_match(udev_pattern_match(t->value, buf), t->op);
        }
        if (streq(t->key, "TUNED_DEVICES"))
                return bool_match(tuned_devices_match(t->value, dev->name), t->op);
        if ((streq(t->key, "KERNELS") || streq(t->key, "SUBSYSTEMS")) && t->op == RULE_OP_MATCH &&
            udev_pattern_match(t->value, streq(t->key, "KERNELS") ? dev->name : "block"))
                return CONFLICT_MATCH_YES;      /* the device itself is the first of the chain */
        if (streq(t->key, "ATTR") && t->attr && dev->read_attr &&
            dev->read_attr(dev->userdata, t->attr, buf, sizeof(buf)) >= 0) {
                /* udev compares with trailing white space removed */
                for (size_t n = strlen(buf); n > 0 && strchr(" \t\n", buf[n - 1]); n--)
                        buf[n - 1] = 0;
                return bool_match(udev_pattern_match(t->value, buf), t->op);
        }
        return CONFLICT_MATCH_MAYBE;
}

ConflictMatch conflict_matches(const Conflict *c, const ConflictDevice *dev, const RuleToken **why) {
        ConflictMatch m = c->maybe ? CONFLICT_MATCH_MAYBE : CONFLICT_MATCH_YES;

        if (why)
                *why = NULL;
        /* a disk without mq/ has no elevator: a scheduler write fails there */
        if (!c->effective || ((c->needs_blk_mq || c->tunable == TUNABLE_SCHEDULER) && !dev->blk_mq))
                return CONFLICT_MATCH_NO;
        for (size_t i = 0; i < c->n_conditions; i++) {
                ConflictMatch k = condition_eval(&c->conditions[i], dev);

                if (k == CONFLICT_MATCH_NO) {
                        if (why)
                                *why = &c->conditions[i];
                        return k;
                }
                if (k == CONFLICT_MATCH_MAYBE && m == CONFLICT_MATCH_YES) {
                        m = k;
                        if (why)
                                *why = &c->conditions[i];
                }
        }
        return m;
}

/* The kernel takes "deadline" for mq-deadline (an alias), and numbers
 * with white space. */
static bool value_equivalent(unsigned tunable, const char *written, const char *live) {
        char *end;
        long long a, b;

        if (streq(written, live))
                return true;
        if (tunable == TUNABLE_SCHEDULER)
                return streq(written, "deadline") && streq(live, "mq-deadline");
        errno = 0;
        a = strtoll(written, &end, 10);
        if (errno || end == written || *strstrip(end))
                return false;
        b = strtoll(live, &end, 10);
        return !errno && end != live && a == b;
}

static const Conflict *attribute(const ConflictSet *s, const ConflictDevice *dev, unsigned tunable, const char *live,
                                 bool dormant) {
        const Conflict *best = NULL;
        ConflictMatch best_m = CONFLICT_MATCH_NO;

        for (size_t i = 0; i < s->n_items; i++) {
                const Conflict *c = &s->items[i];
                ConflictMatch m;

                /* a program that does not run wrote nothing: naming it sent
                 * admins after an agent that was only installed */
                if (c->dormant != dormant || c->tunable != tunable || !value_equivalent(tunable, c->value, live))
                        continue;
                m = conflict_matches(c, dev, NULL);
                /* a sure match over a maybe; then a udev rule (it names the
                 * disk, and fires at every event) over a profile or an agent
                 * that write every disk, the set's order; among udev rules
                 * the last, whose write is the one that stays */
                if (m != CONFLICT_MATCH_NO &&
                    (m > best_m || (m == best_m && c->source == CONFLICT_UDEV && best->source == CONFLICT_UDEV))) {
                        best = c;
                        best_m = m;
                }
        }
        return best;
}

const Conflict *conflicts_attribute(const ConflictSet *s, const ConflictDevice *dev, unsigned tunable,
                                    const char *live) {
        return attribute(s, dev, tunable, live, false);
}

const Conflict *conflicts_attribute_dormant(const ConflictSet *s, const ConflictDevice *dev, unsigned tunable,
                                            const char *live) {
        return attribute(s, dev, tunable, live, true);
}

char *conflict_describe(const Conflict *c) {
        const char *attr = tunables[c->tunable].attr;
        char *s = NULL;
        int r;

        switch (c->source) {
        case CONFLICT_UDEV:
                r = asprintf(&s, "udev rule %s:%u sets queue/%s=%s%s%s%s", c->path, c->line, attr, c->value,
                             c->match ? " (" : "", c->match ?: "", c->match ? ")" : "");
                break;
        case CONFLICT_TUNED:
                r = asprintf(&s, "tuned profile %s:%u sets queue/%s=%s (%s)", c->path, c->line, attr, c->value,
                             c->match ?: "");
                break;
        case CONFLICT_GCE:
                r = asprintf(&s, "the GCE guest agent (%s) sets queue/%s=%s on %s at each start", c->path, attr,
                             c->value, c->match ?: "every disk");
                break;
        case CONFLICT_SYSFSD:
                r = asprintf(&s, "sysfsutils %s:%u sets queue/%s=%s (%s)", c->path, c->line, attr, c->value,
                             c->match ?: "");
                break;
        case CONFLICT_TMPFILES:
                r = asprintf(&s, "tmpfiles.d %s:%u writes queue/%s=%s (%s)", c->path, c->line, attr, c->value,
                             c->match ?: "");
                break;
        case CONFLICT_LVM:
                r = asprintf(&s, "LVM (%s%s%.0u) sets the read-ahead of its logical volumes: %s", c->path,
                             c->line ? ":" : "", c->line, c->value);
                break;
        default:
                r = asprintf(&s, "the kernel command line sets elevator=%s, which blk-mq ignores", c->value);
                break;
        }
        return r < 0 ? NULL : s;
}

