/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Every fuzz target implements LLVMFuzzerTestOneInput. Built with
 * -Dfuzzing=true and clang it links libFuzzer; otherwise fuzz-main.c turns
 * it into a program that replays corpus files, which `meson test` runs. */

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Writes data to a fresh temporary file; returns its path (static buffer). */
const char *fuzz_write_tmp(const uint8_t *data, size_t size, const char *suffix);
