/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "sysfs.h"
#include "trial-memory-file.h"
#include "util.h"

#define MEMORY_FILE_MAX (8U << 20)

static void cjson_deletep(cJSON **j) {
        cJSON_Delete(*j);
}

static const char *string_of(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double number_of(const cJSON *o, const char *key, double otherwise) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        return cJSON_IsNumber(v) ? v->valuedouble : otherwise;
}

static int memo_from_json(const cJSON *o, TrialMemo *memo) {
        const char *identity = string_of(o, "identity"), *model = string_of(o, "model"),
                   *kernel = string_of(o, "kernel"), *trial = string_of(o, "trial"),
                   *verdict = string_of(o, "verdict"), *kept = string_of(o, "kept"), *error;
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(o, "shape");
        unsigned n = 0;
        int v;

        if (!identity || !model || !kernel || !trial || !verdict || !cJSON_IsObject(shape))
                return -EBADMSG;
        v = trial_verdict_from_string(verdict);
        *memo = (TrialMemo) {
                .verdict = v < 0 ? TRIAL_INCONCLUSIVE : (TrialVerdict) v,
                .estimate = number_of(o, "estimate", 1),
                .at_sec = (uint64_t) number_of(o, "at", 0),
                .shape = { number_of(shape, "read_share", -1), number_of(shape, "request_bytes", 0) },
        };
        if (strscpy(memo->identity, sizeof(memo->identity), identity) < 0 ||
            strscpy(memo->model, sizeof(memo->model), model) < 0 ||
            strscpy(memo->kernel, sizeof(memo->kernel), kernel) < 0 ||
            strscpy(memo->trial, sizeof(memo->trial), trial) < 0)
                return -EBADMSG;
        if (kept) {
                if (sched_choices_parse(kept, &memo->kept, &n, &error) < 0 || n != 1)
                        return -EBADMSG;
                memo->has_kept = true;
        }
        return 0;
}

int trial_memory_load(const char *path, TrialMemory *m) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        const cJSON *list, *o;
        size_t len;
        int k;

        trial_memory_done(m);
        k = sysfs_read_all(path, MEMORY_FILE_MAX, &text, &len);
        if (k == -ENOENT)
                return 0;
        if (k < 0)
                return k;
        j = cJSON_ParseWithLength(text, len);
        list = cJSON_GetObjectItemCaseSensitive(j, "verdicts");
        if (!j || number_of(j, "blkpolicyd_trial_verdicts", 0) != 1 || !cJSON_IsArray(list))
                return -EBADMSG;
        cJSON_ArrayForEach(o, list) {
                TrialMemo memo;

                if (memo_from_json(o, &memo) < 0)
                        continue;       /* one bad entry: that verdict is taken again */
                k = trial_memory_put(m, &memo);
                if (k < 0)
                        return k;
        }
        return 0;
}

static cJSON *memo_to_json(const TrialMemo *memo) {
        cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateObject();
        char kept[SCHED_NAME_MAX + 16];

        if (!o || !shape || !cJSON_AddItemToObject(o, "shape", shape)) {
                cJSON_Delete(o);
                cJSON_Delete(shape);
                return NULL;
        }
        if (memo->has_kept && sched_choice_format(&memo->kept, kept, sizeof(kept)) < 0)
                kept[0] = 0;
        if (!cJSON_AddStringToObject(o, "identity", memo->identity) ||
            !cJSON_AddStringToObject(o, "model", memo->model) ||
            !cJSON_AddStringToObject(o, "kernel", memo->kernel) ||
            !cJSON_AddStringToObject(o, "trial", memo->trial) ||
            !cJSON_AddNumberToObject(shape, "read_share", memo->shape.read_share) ||
            !cJSON_AddNumberToObject(shape, "request_bytes", memo->shape.request_bytes) ||
            !(memo->has_kept ? cJSON_AddStringToObject(o, "kept", kept) : cJSON_AddNullToObject(o, "kept")) ||
            !cJSON_AddStringToObject(o, "verdict", trial_verdict_to_string(memo->verdict)) ||
            !cJSON_AddNumberToObject(o, "estimate", memo->estimate) ||
            !cJSON_AddNumberToObject(o, "at", (double) memo->at_sec)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static char *memory_format(const TrialMemory *m) {
        _cleanup_(cjson_deletep) cJSON *j = cJSON_CreateObject();
        cJSON *list = cJSON_CreateArray();

        if (!j || !list || !cJSON_AddItemToObject(j, "verdicts", list)) {
                cJSON_Delete(list);
                return NULL;
        }
        if (!cJSON_AddNumberToObject(j, "blkpolicyd_trial_verdicts", 1))
                return NULL;
        for (size_t i = 0; i < m->n; i++) {
                cJSON *o = memo_to_json(&m->memos[i]);

                if (!o || !cJSON_AddItemToArray(list, o)) {
                        cJSON_Delete(o);
                        return NULL;
                }
        }
        return cJSON_Print(j);
}

static int make_parent(const char *path) {
        char dir[PATH_MAX];
        char *slash;

        if (strscpy(dir, sizeof(dir), path) < 0)
                return -ENAMETOOLONG;
        slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = 0;
        return mkdir(dir, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

int trial_memory_save(const char *path, const TrialMemory *m) {
        _cleanup_free_ char *text = memory_format(m);
        _cleanup_close_ int fd = -EBADF;
        char tmp[PATH_MAX];
        int k;

        if (!text)
                return -ENOMEM;
        k = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        if (k < 0 || (size_t) k >= sizeof(tmp))
                return -ENAMETOOLONG;
        k = make_parent(path);
        if (k < 0)
                return k;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        k = write_all(fd, text);
        if (k == 0 && fsync(fd) < 0)
                k = -errno;
        if (k == 0 && rename(tmp, path) < 0)
                k = -errno;
        if (k < 0)
                (void) unlink(tmp);
        return k;
}
