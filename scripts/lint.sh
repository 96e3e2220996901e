#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Static analysis with the configs in the tree; any finding fails.
#   cppcheck: warning, performance, portability. resourceLeak and memleak are
#     suppressed because cppcheck does not understand __attribute__((cleanup)),
#     which every file here uses; ASan/LSan and valgrind memcheck in the test
#     command check leaks for real. cJSON_ArrayForEach is defined for it.
#   clang-tidy: .clang-tidy (clang-analyzer-* and bugprone-*, minus the checks
#     listed there with the reason), over build/compile_commands.json.
#   callgraph: scripts/callgraph.py over the built daemon objects; files of
#     daemon/ that call each other in a loop fail (the graph and the symbols
#     of each loop are printed), and so does a public function of daemon/
#     that no other file, main, blkpolicyctl, tests/unit or fuzz/ calls.
#     Needs a built tree: the test command builds before it lints.
#   layout: scripts/layout.py, README's source layout names every C file of
#     daemon/ and ctl/, and only files that exist.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
passed=0 failed=0

out=$(cppcheck --enable=warning,performance,portability --inline-suppr --quiet --error-exitcode=1 \
        -I include -I daemon/core -I daemon/conflicts -I daemon/io -I daemon/loop -I daemon/control -I "$build" -D_GNU_SOURCE "-DcJSON_ArrayForEach(e,a)=for(e=(a)?(a)->child:NULL;e;e=e->next)" \
        --suppress=resourceLeak --suppress=memleak --std=c11 daemon/ ctl/ fuzz/ bench/ tests/vm/ 2>&1)
if [ $? -eq 0 ] && [ -z "$out" ]; then
        echo "ok - cppcheck"; passed=$((passed + 1))
else
        echo "not ok - cppcheck"; echo "$out"; failed=$((failed + 1))
fi

out=$(clang-tidy -p "$build" --quiet daemon/*.c daemon/*/*.c ctl/*.c tests/vm/*.c 2>/dev/null | grep -E "warning:|error:")
if [ -z "$out" ]; then
        echo "ok - clang-tidy"; passed=$((passed + 1))
else
        echo "not ok - clang-tidy"; echo "$out"; failed=$((failed + 1))
fi
out=$(scripts/callgraph.py "$build" 2>&1)
if [ $? -eq 0 ]; then
        echo "ok - callgraph"; passed=$((passed + 1))
else
        echo "not ok - callgraph"; echo "$out"; failed=$((failed + 1))
fi
out=$(scripts/layout.py . 2>&1)
if [ $? -eq 0 ]; then
        echo "ok - layout"; passed=$((passed + 1))
else
        echo "not ok - layout"; echo "$out"; failed=$((failed + 1))
fi
echo "lint: $passed passed, $failed failed"
[ $failed -eq 0 ]
