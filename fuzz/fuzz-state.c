/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state-record parser: anything an attacker or a torn write can leave
 * in the state dir. What parses must format and parse back the same. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "state.h"
#include "util.h"

static void check_round_trip(const DeviceRecord *r, const char *name) {
        _cleanup_free_ char *text = device_record_format(r, name);
        DeviceRecord back = {};
        char name_back[STATE_NAME_MAX];

        if (!text)
                return;
        if (device_record_parse(text, strlen(text), &back, name_back) != 0 ||
            device_record_count(&back) != device_record_count(r) || !device_identity_same(&back.id, &r->id) ||
            !streq(name_back, name))
                abort();
        for (unsigned i = 0; i < device_record_count(r); i++) {
                const AttrRecord *x = &back.attrs->at[i], *y = &r->attrs->at[i];

                if (x->tunable != y->tunable || !streq(x->found, y->found) || !streq_ptr(x->written, y->written))
                        abort();
        }
        device_record_done(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        DeviceRecord r = {};
        char name[STATE_NAME_MAX];

        if (size > 65536)
                return 0;
        if (device_record_parse((const char *) data, size, &r, name) >= 0) {
                /* the identity's queue must be known for identity_same to hold */
                if (r.id.queue_id != 0)
                        check_round_trip(&r, name);
                device_record_done(&r);
        }
        return 0;
}
