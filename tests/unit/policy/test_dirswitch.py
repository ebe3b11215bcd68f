"""Explicit directory switches of git, make, pnpm, npm and yarn (``octipusd.policy.dirswitch``)."""

from __future__ import annotations

import pytest

from octipusd.policy.dirswitch import DirectorySwitch, directory_switches, first_refusal, lexical_problem


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        # git: its global options only, -C composed as git composes them
        ("git -C sub status", ["sub"]),
        ("git -C a -C b log", ["a", "a/b"]),
        ("git -C a -C /abs log", ["a", "/abs"]),
        ("git -c user.name=x -C sub commit", ["sub"]),
        ("git --git-dir=.git --work-tree w status", [".git", "w"]),
        ("git -C a --work-tree=b status", ["a", "a/b"]),
        ("git log -C", []),  # copy detection, not a switch
        ("git blame -C -C file", []),
        # make: anywhere before --, bundles and abbreviations of --directory
        ("make -C sub test", ["sub"]),
        ("make -Csub test", ["sub"]),
        ("make -sC sub test", ["sub"]),
        ("make test --directory=sub", ["sub"]),
        ("make --dir sub", ["sub"]),
        ("make -f Makefile.ci -C sub -C deeper", ["sub", "sub/deeper"]),
        ("make -j4 -k all", []),
        ("make -fC all", []),  # -f's value is "C"
        ("make -- -C sub", []),
        # pnpm, npm, yarn
        ("pnpm -C web test", ["web"]),
        ("pnpm --dir=web test", ["web"]),
        ("pnpm --dir web run lint", ["web"]),
        ("npm --prefix web ci", ["web"]),
        ("npm --prefix=web test", ["web"]),
        ("npm -C web test", ["web"]),
        ("npm run test -- --prefix /elsewhere", []),  # the script's own arguments
        ("yarn --cwd web test", ["web"]),
        ("yarn --cwd=web test", ["web"]),
        # nested, wrapped and by path
        ("sh -c 'git -C /x status'", ["/x"]),
        ("echo $(make -C .. x)", [".."]),
        ("timeout 60 /usr/bin/git -C sub status", ["sub"]),
        ("cd sub && pnpm test", []),  # cd is not one of the five tools' switches
        ("pytest -C x", []),
    ],
)
def test_each_tool_s_own_switches_are_found(command: str, paths: list[str]) -> None:
    assert [s.path for s in directory_switches(command)] == paths


def test_a_switch_names_its_tool_and_spelling() -> None:
    assert directory_switches("npm --prefix=../x ci") == [DirectorySwitch("npm", "npm --prefix ../x", "../x")]
    (git_dir,) = directory_switches("git --git-dir=.git status")
    assert not git_dir.directory  # a gitfile is fine


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("sub", None),
        ("sub/../other", None),
        (".", None),
        ("", None),
        ("/host/repo", "an absolute path"),
        ("..", "'..' climbs out"),
        ("sub/../../x", "'..' climbs out"),
        ("~/repo", "a home directory path"),
        ("$HOME/repo", "the shell expands it"),
        ("pkg*", "the shell expands it"),
    ],
)
def test_a_path_is_judged_inside_or_outside_from_its_text(path: str, problem: str | None) -> None:
    found = lexical_problem(path)
    assert (found is None) if problem is None else (found is not None and found.startswith(problem))


@pytest.mark.parametrize(
    "command",
    [
        "pnpm -C /host/repo test",
        "npm --prefix ../other ci",
        "yarn --cwd /srv/app test",
        "git -C sub -C ../.. status",
        "make --directory=/tmp all",
        'make -C "$REPO" test',
        "bash -c 'cd . && git -C ~ status'",
    ],
)
def test_a_switch_outside_the_tree_is_refused(command: str) -> None:
    refusal = first_refusal(command)
    assert refusal is not None and refusal.startswith("'")


@pytest.mark.parametrize(
    "command", ["pnpm test", "git -C pkg status", "make -C sub/.. test", "npm --prefix web ci", "git log -C"]
)
def test_a_switch_inside_the_tree_is_accepted(command: str) -> None:
    assert first_refusal(command) is None
