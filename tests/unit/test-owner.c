/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* owner.c without I/O: who owns a setting, and what a view shows of it,
 * from a record, a target and one live read. */
#include "owner.h"
#include "tests.h"
#include "util.h"

static LiveValue ok(const char *v) {
        LiveValue lv = { .state = LIVE_OK };

        (void) strscpy(lv.value, sizeof(lv.value), v);
        return lv;
}

static ItemResult view(ItemResult last, const char *target, const char *live, const AttrRecord *a, bool enforced) {
        LiveValue lv = live ? ok(live) : (LiveValue) { .state = LIVE_UNKNOWN };
        SettingSeen s = { .last = last, .target = target, .live = &lv, .record = a, .enforced = enforced };

        return setting_view(&s);
}

TEST(owner_from_the_record) {
        AttrRecord a = { .found = (char *) "128", .written = (char *) "4096" };
        AttrRecord fresh = { .found = (char *) "128" };
        AttrRecord flight = { .found = (char *) "128", .intent = (char *) "8192" };

        ASSERT_EQ_INT(setting_owner(NULL, "128"), OWNER_KERNEL);
        ASSERT_EQ_INT(setting_owner(&a, "4096"), OWNER_BLKPOLICYD);
        ASSERT_EQ_INT(setting_owner(&a, "512"), OWNER_ADMIN);
        /* the found value put back by hand after blkpolicyd's landed: the admin's */
        ASSERT_EQ_INT(setting_owner(&a, "128"), OWNER_ADMIN);
        ASSERT_EQ_INT(setting_owner(&fresh, "128"), OWNER_NOBODY);
        ASSERT_EQ_INT(setting_owner(&flight, "8192"), OWNER_BLKPOLICYD);
}

TEST(view_in_place) {
        AttrRecord mine = { .found = (char *) "none", .written = (char *) "mq-deadline" };

        ASSERT_EQ_INT(view(RESULT_APPLIED, "mq-deadline", "mq-deadline", &mine, true), RESULT_APPLIED);
        /* a later pass found blkpolicyd's value in place and wrote nothing */
        ASSERT_EQ_INT(view(RESULT_UNCHANGED, "mq-deadline", "mq-deadline", &mine, true), RESULT_UNCHANGED);
        /* the kernel's value was the target already: nothing of blkpolicyd's there */
        ASSERT_EQ_INT(view(RESULT_UNCHANGED, "mq-deadline", "mq-deadline", NULL, true), RESULT_UNCHANGED);
        /* a stale "planned" (observe) once the value is in place: unchanged */
        ASSERT_EQ_INT(view(RESULT_PLANNED, "mq-deadline", "mq-deadline", NULL, false), RESULT_UNCHANGED);
}

TEST(view_someone_elses_change) {
        AttrRecord mine = { .found = (char *) "none", .written = (char *) "mq-deadline" };

        ASSERT_EQ_INT(view(RESULT_APPLIED, "mq-deadline", "kyber", &mine, true), RESULT_OVERRIDDEN);
        /* in place with nothing written, then changed: the admin's change to a held setting */
        ASSERT_EQ_INT(view(RESULT_UNCHANGED, "256", "512", NULL, true), RESULT_OVERRIDDEN);
        /* observing, the same live value is only pending: blkpolicyd holds nothing */
        ASSERT_EQ_INT(view(RESULT_APPLIED, "mq-deadline", "none", NULL, false), RESULT_PLANNED);
        ASSERT_EQ_INT(view(RESULT_UNCHANGED, "256", "512", NULL, false), RESULT_PLANNED);
}

TEST(view_not_kept) {
        AttrRecord kept = { .found = (char *) "500", .written = (char *) "4" };

        ASSERT_EQ_INT(view(RESULT_NOT_KEPT, "1", "4", &kept, true), RESULT_NOT_KEPT);
        /* not kept, then the admin's value: their change, not the kernel's rounding */
        ASSERT_EQ_INT(view(RESULT_NOT_KEPT, "1", "100", &kept, true), RESULT_OVERRIDDEN);
        /* a new target the pass has not written yet is no verdict on the kernel */
        ASSERT_EQ_INT(view(RESULT_PLANNED, "8", "4", &kept, true), RESULT_PLANNED);
}

TEST(view_keeps_what_it_cannot_judge) {
        LiveValue absent = { .state = LIVE_ABSENT };
        SettingSeen s = { .last = RESULT_PLANNED, .target = "1", .live = &absent, .enforced = true };

        ASSERT_EQ_INT(setting_view(&s), RESULT_PLANNED);       /* waits for its scheduler */
        /* in force, then gone with its scheduler: someone switched it away */
        s.last = RESULT_APPLIED;
        ASSERT_EQ_INT(setting_view(&s), RESULT_OVERRIDDEN);
        s.enforced = false;
        ASSERT_EQ_INT(setting_view(&s), RESULT_PLANNED);
        ASSERT_EQ_INT(view(RESULT_FAILED, "1", NULL, NULL, true), RESULT_FAILED);
        ASSERT_EQ_INT(view(RESULT_UNSUPPORTED, "1", "4", NULL, true), RESULT_UNSUPPORTED);
        ASSERT_EQ_INT(view(RESULT_RETRY, "256", "128", NULL, true), RESULT_RETRY);
        ASSERT_EQ_INT(view(RESULT_FAILED, "256", "128", NULL, true), RESULT_FAILED);
}
