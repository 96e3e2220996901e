#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The shipped policy sets (docs/service.md, "Upgrades"): a host runs the
set its policy_set= names, so a released set must never change.

policies/ is the newest set, its number in policies/policy-set. A set an
upgrade superseded is frozen in policies/sets/N/. policies/sets/SHA256SUMS
lists every file of every released set as "SHA256  N/NAME": a frozen set's
in sets/N/, the newest set's (once released) in policies/.

  policy-sets.py check [POLICIES]    every released file as listed, nothing
                                     added to a released set, the newest
                                     number above every frozen one
  policy-sets.py release [POLICIES]  the newest set is released: list it
  policy-sets.py freeze [POLICIES]   before changing a shipped file of a
                                     released newest set: copy it to sets/N,
                                     number policies/ N+1 (unreleased, free
                                     to change until `release`)
"""
import hashlib
import os
import shutil
import sys

SUMS = "SHA256SUMS"
NUMBER = "policy-set"
NOT_SHIPPED = {"meson.build"}


def set_number(path):
    """The first line of a policy-set file that is not a comment."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                return int(line)
    raise ValueError(f"{path}: no number")


def set_files(d):
    """What a set installs: every regular file of its dir but the build's."""
    return sorted(n for n in os.listdir(d) if n not in NOT_SHIPPED and os.path.isfile(os.path.join(d, n)))


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_sums(path):
    sums = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    h, name = line.split(None, 1)
                    sums[name.strip()] = h
    return sums


def write_sums(path, sums):
    with open(path, "w") as f:
        f.write("# Every file of every released policy set: never edit one of them, freeze the\n"
                "# set instead (scripts/policy-sets.py freeze). Checked by tests/policy-sets.py.\n")
        for name in sorted(sums, key=lambda n: (int(n.split("/")[0]), n)):
            f.write(f"{sums[name]}  {name}\n")


def frozen_sets(policies):
    sets = os.path.join(policies, "sets")
    return sorted(int(n) for n in os.listdir(sets) if os.path.isdir(os.path.join(sets, n))) \
        if os.path.isdir(sets) else []


def set_dir(policies, n, newest):
    return policies if n == newest else os.path.join(policies, "sets", str(n))


def check(policies):
    """The problems, one line each; none when the sets are as released."""
    problems = []
    sets = os.path.join(policies, "sets")
    newest = set_number(os.path.join(policies, NUMBER))
    frozen = frozen_sets(policies)
    for name in (os.listdir(sets) if os.path.isdir(sets) else []):
        if name != SUMS and not (name.isdigit() and name[0] != "0" and os.path.isdir(os.path.join(sets, name))):
            problems.append(f"sets/{name}: not a set (a set is a dir named by its number)")
    for n in frozen:
        if n >= newest:
            problems.append(f"sets/{n}: frozen, yet not older than the newest set {newest} (policies/{NUMBER})")
        path = os.path.join(sets, str(n), NUMBER)
        if not os.path.exists(path) or set_number(path) != n:
            problems.append(f"sets/{n}/{NUMBER}: must say {n}")
    sums = read_sums(os.path.join(sets, SUMS))
    released = {int(name.split("/")[0]) for name in sums}
    for n in frozen:
        if n not in released:
            problems.append(f"sets/{n}: frozen but not in sets/{SUMS} (scripts/policy-sets.py release, before it was frozen)")
    for name, h in sums.items():
        n, file = name.split("/", 1)
        if int(n) not in frozen and int(n) != newest:
            problems.append(f"{name}: released, but set {n} is neither frozen nor the newest")
            continue
        path = os.path.join(set_dir(policies, int(n), newest), file)
        if not os.path.exists(path):
            problems.append(f"{name}: released, and gone from {os.path.relpath(path, policies)}")
        elif digest(path) != h:
            problems.append(f"{name}: released, and changed in {os.path.relpath(path, policies)}: "
                            f"freeze the set first (scripts/policy-sets.py freeze)")
    for n in released & ({newest} | set(frozen)):
        for file in set_files(set_dir(policies, n, newest)):
            if f"{n}/{file}" not in sums:
                problems.append(f"{n}/{file}: added to released set {n}")
    return problems


def release(policies):
    newest = set_number(os.path.join(policies, NUMBER))
    path = os.path.join(policies, "sets", SUMS)
    sums = {k: v for k, v in read_sums(path).items() if not k.startswith(f"{newest}/")}
    for file in set_files(policies):
        sums[f"{newest}/{file}"] = digest(os.path.join(policies, file))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_sums(path, sums)


def freeze(policies):
    newest = set_number(os.path.join(policies, NUMBER))
    if not any(k.startswith(f"{newest}/") for k in read_sums(os.path.join(policies, "sets", SUMS))):
        sys.exit(f"set {newest} is not released: change it in place")
    dest = os.path.join(policies, "sets", str(newest))
    os.makedirs(dest)
    for file in set_files(policies):
        shutil.copy2(os.path.join(policies, file), dest)
    with open(os.path.join(policies, NUMBER)) as f:
        text = f.read()
    with open(os.path.join(policies, NUMBER), "w") as f:
        f.write("".join(line if line.startswith("#") or not line.strip() else f"{newest + 1}\n"
                        for line in text.splitlines(True)))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("check", "release", "freeze"):
        sys.exit(__doc__)
    policies = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "policies")
    if sys.argv[1] == "release":
        release(policies)
    elif sys.argv[1] == "freeze":
        freeze(policies)
    problems = check(policies)
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
