/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The one way an INI file is read: inih (its ini_parse_stream()) over a
 * reader that counts lines, catches the lines inih would split and cuts
 * inline comments by the rule of the file's format. blkpolicyd.conf, the
 * policy files and tuned's profiles all go through it. */

#include <ini.h>
#include <stdio.h>

/* What starts an inline comment after white space. A line that is a
 * comment as a whole ('#' or ';' first) is left to inih, which skips it. */
#define INI_COMMENTS_OURS "#;"  /* blkpolicyd's files: "exclude = sda   # boot disk" */
#define INI_COMMENTS_TUNED "#"  /* tuned's configparser: inline_comment_prefixes=('#',) */

/* Rewrites one whole line of text (its comment cut, no newline; free to
 * change in place) into inih's buffer of size bytes: for a format inih
 * does not read the way its own tools do. */
typedef void (*IniRewrite)(char *line, char *buf, size_t size, void *userdata);

typedef struct IniReader {
        FILE *file;             /* the lines, or else text */
        const char *text;
        const char *comments;   /* INI_COMMENTS_*; NULL: none cut */
        IniRewrite rewrite;     /* text only; NULL: lines as they are */
        void *userdata;         /* rewrite's */
        /* what the handler may read: the number of the line inih just
         * read (its handler runs right after the read), and the first line
         * longer than inih's buffer (inih would read its rest as another
         * line, or as a continuation of its value), 0: none */
        unsigned line;
        unsigned long_line;
        const char *pos;
        int error;
} IniReader;

/* ini_parse_stream() over r: inih's result (0, or the first line inih
 * found wrong), or -ENOMEM. */
int ini_reader_parse(IniReader *r, ini_handler handler, void *userdata);
