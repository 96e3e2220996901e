/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* An enum's names: name_to_string(value) (NULL out of range) and
 * name_from_string(text) (the value, or -EINVAL). */
#define DECLARE_STRING_TABLE(name, type)                \
        const char *name##_to_string(type v);           \
        int name##_from_string(const char *s)

/* Both, over a table of names indexed by the enum, max entries long (a
 * .c file's, with util.h's streq()). */
#define DEFINE_STRING_TABLE(name, type, table, max)                             \
        const char *name##_to_string(type v) {                                  \
                return (unsigned) v < (unsigned) (max) ? (table)[v] : NULL;     \
        }                                                                       \
        int name##_from_string(const char *s) {                                 \
                for (int i = 0; i < (int) (max); i++)                           \
                        if ((table)[i] && streq((table)[i], s))                 \
                                return i;                                       \
                return -EINVAL;                                                 \
        }
