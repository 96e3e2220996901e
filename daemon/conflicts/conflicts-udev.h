/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* udev rules: the rules.d directories in udev's order of precedence, their
 * ATTR{queue/...}= assignments and the RUN+= programs that write a queue
 * setting (conflicts-udev.c). */

#include "conflict-set.h"

typedef struct UdevRule {
        RuleToken *tokens;
        size_t n_tokens;
} UdevRule;

/* Parses one logical rule line (continuations already joined, no
 * comment). 0 and an empty rule for blank lines; -EINVAL for a line udev
 * would reject; -ENOMEM. */
int udev_rule_parse(const char *line, UdevRule *ret);
void udev_rule_done(UdevRule *r);
/* udev patterns: shell globs, with | between alternatives. */
bool udev_pattern_match(const char *pattern, const char *s);
/* KEY{attr}OP"value", as in a rules file. */
int rule_token_format(const RuleToken *t, char *buf, size_t size);

int conflicts_scan_udev(const char *root, ConflictSet *s);
/* One rules file's text, as if read from path (the fuzzer's entry point). */
int conflicts_parse_udev_text(const char *path, const char *text, ConflictSet *s);
