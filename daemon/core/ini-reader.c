/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The shared INI reader (ini-reader.h): inih does the parsing; this feeds
 * it lines, numbered, with the inline comments of the file's format cut,
 * as inih itself cuts only ';' ones. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ini-reader.h"

/* "scheduler = none   # the device schedules": a comment character after
 * white space ends the line. */
static void cut_inline_comment(char *line, const char *comments) {
        char *p = line + strspn(line, " \t");

        if (!comments || *p == '#' || *p == ';')
                return;
        for (; *p; p++)
                if (strchr(comments, *p) && p > line && (p[-1] == ' ' || p[-1] == '\t')) {
                        /* keep the newline: the file reader counts lines by it */
                        bool nl = strchr(p, '\n');

                        p[0] = nl ? '\n' : 0;
                        if (nl)
                                p[1] = 0;
                        return;
                }
}

static char *file_reader(char *str, int num, void *stream) {
        IniReader *r = stream;
        char *s = fgets(str, num, r->file);
        size_t n;

        if (!s)
                return NULL;
        n = strlen(s);
        if (n > 0 && s[n - 1] != '\n' && !feof(r->file)) {
                if (!r->long_line)
                        r->long_line = r->line + 1;
        } else
                r->line++;
        cut_inline_comment(s, r->comments);
        return s;
}

/* A whole line of text at a time: a rewrite sees all of it, however long. */
static char *text_reader(char *str, int num, void *stream) {
        IniReader *r = stream;
        const char *nl;
        size_t n;
        char *line;

        if (r->error < 0 || !r->pos || !*r->pos)
                return NULL;
        nl = strchr(r->pos, '\n');
        n = nl ? (size_t) (nl - r->pos) : strlen(r->pos);
        line = strndup(r->pos, n);
        if (!line) {
                r->error = -ENOMEM;
                return NULL;
        }
        r->pos += nl ? n + 1 : n;
        r->line++;
        cut_inline_comment(line, r->comments);
        if (r->rewrite)
                r->rewrite(line, str, (size_t) num, r->userdata);
        else {
                /* as file_reader() counts it: a line that leaves its
                 * newline no room in inih's buffer, so that a policy's text
                 * and its file are refused alike */
                if (strlen(line) + 1 >= (size_t) num && !r->long_line)
                        r->long_line = r->line;
                snprintf(str, (size_t) num, "%s", line);
        }
        free(line);
        return str;
}

int ini_reader_parse(IniReader *r, ini_handler handler, void *userdata) {
        int k;

        r->line = r->long_line = 0;
        r->pos = r->text;
        r->error = 0;
        k = ini_parse_stream(r->file ? file_reader : text_reader, r, handler, userdata);
        if (r->error < 0)
                return r->error;
        return k < 0 ? -ENOMEM : k;     /* -2: inih's own allocation failed */
}
