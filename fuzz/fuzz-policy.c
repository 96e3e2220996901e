/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "decide.h"
#include "fuzz.h"
#include "plan.h"
#include "policy.h"
#include "util.h"

/* verify --policy's parser, the file's text without the file: it must
 * take what the file parser takes and refuse what it refuses (a NUL ends
 * a text; the request cannot carry one). */
static int parse_text(const uint8_t *data, size_t size, int file_result) {
        _cleanup_free_ char *text = strndup((const char *) data, size);
        PolicyErrors errors = {};
        Policy *p = NULL;
        int r;

        if (!text)
                return 0;
        r = policy_parse_text(text, "input.policy", &errors, &p);
        if (r != -ENOMEM && !memchr(data, 0, size) && r != file_result)
                abort();
        policy_free(p);
        policy_errors_done(&errors);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *path = fuzz_write_tmp(data, size, ".policy");
        PolicyErrors errors = {};
        Policy *p = NULL;
        int r = policy_parse_file(path, "input.policy", &errors, &p);

        (void) parse_text(data, size, r);
        if (r == 0) {
                /* what parsed must also decide without tripping anything */
                DeviceFacts f = { .name = "vda", .hw_queues = 1, .classes = CLASS_BIT(CLASS_SINGLE_QUEUE) };
                KernelCaps caps = { .version = { 6, 1, 0 }, .dispatch_direct = TRISTATE_YES };
                Policy *list[] = { p };
                PolicySet one = { .policies = list, .n_policies = 1 };
                PlanBuffer b, preview;
                PlanItem canary[TUNABLES_MAX];
                DecideInput in = { .facts = &f, .caps = &caps, .policies = &one };

                (void) scheduler_list_parse("none [mq-deadline]", &f.schedulers);
                decide(&in, plan_buffer_init(&b));
                /* a canary (mode=observe) is decided again, with it in force */
                (void) decide_canaries(&in, &b.plan, plan_buffer_init(&preview), canary);
                in.busy = true;
                decide(&in, plan_buffer_init(&b));
                policy_free(p);
        }
        policy_errors_done(&errors);
        return 0;
}
