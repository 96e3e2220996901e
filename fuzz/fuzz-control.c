/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control protocol's request handler, against a Manager that has
 * scanned a fixture machine in dry-run mode. The peer is not root, so the
 * mutating requests are refused rather than re-reading files per input;
 * every other request runs for real. */
#include <stdlib.h>

#include "commands.h"
#include "fuzz.h"
#include "log.h"
#include "manager.h"

static Manager *manager;
static Options options;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        const char *fixtures = getenv("BLKPOLICYD_FIXTURE") ?: FIXTURES_DIR "/kvm-6.18";
        static char sys[4096], proc[4096], debug[4096];
        static char *dirs[] = { POLICIES_DIR, NULL };

        (void) argc;
        (void) argv;
        log_set_max_level(LOG_EMERG);
        snprintf(sys, sizeof(sys), "%s/sys", fixtures);
        snprintf(proc, sizeof(proc), "%s/proc", fixtures);
        snprintf(debug, sizeof(debug), "%s/debug", fixtures);
        options = (Options) { .config_path = "/dev/null", .policy_dirs = dirs, .roots = { sys, debug, proc },
                              .state_dir = "/nonexistent", .dry_run = true, .mode = RUN_ONCE, .log_level = LOG_EMERG };
        if (manager_new(&options, &manager) < 0 || manager_scan(manager) < 0)
                abort();
        return 0;
}

/* A stream's parts, to the end, into memory: the whole reply is one line. */
static void drain(ControlStream *s) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        int r;

        if (!f)
                abort();
        while ((r = s->next(s, manager, f)) > 0)
                ;
        if (r < 0 || fclose(f) != 0 || size == 0 || text[size - 1] != '\n' ||
            memchr(text, '\n', size) != text + size - 1)
                abort();
        free(text);
        s->free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Peer peer = { .pid = 1, .uid = 1000, .gid = 1000 };
        ControlReply reply;

        if (!manager)
                LLVMFuzzerInitialize(NULL, NULL);
        reply = commands_run(manager, &peer, NULL, (const char *) data, size);
        if (!reply.json && !reply.stream && !reply.later)
                abort();        /* only -ENOMEM may give no reply */
        cJSON_Delete(reply.json);
        if (reply.stream)
                drain(reply.stream);
        return 0;
}
