"""The shared shell parser (octipusd.policy.shellwords): tokens, simple commands, unwrapping, nesting."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings, strategies as st

from octipusd.policy.shellwords import (
    SUBSTITUTION_WORD,
    Command,
    Redirect,
    command_index,
    command_name,
    is_operator,
    parse,
    shell_script,
    tokens,
    unwrap,
    walk,
)


def words(command: str, **options: bool) -> list[list[str]]:
    return [simple.words for simple in parse(command, **options).commands]


def names(command: str, max_depth: int = 3) -> list[tuple[str, int]]:
    return [(found.name, found.depth) for found in walk(command, max_depth=max_depth)]


# ---------------------------------------------------------------------------- tokens


def test_tokens_split_operators_and_keep_quotes_together() -> None:
    assert tokens("cat 'a b' \"c\"|wc -l;echo x>f") == [
        "cat", "a b", "c", "|", "wc", "-l", ";", "echo", "x", ">", "f",
    ]  # fmt: skip
    assert tokens("a\nb && c") == ["a", "\n", "b", "&&", "c"]
    assert tokens("echo x#y # z") == ["echo", "x#y", "#", "z"]  # no comment handling here


def test_is_operator() -> None:
    assert is_operator(";") and is_operator(">&") and is_operator("\n")
    assert not is_operator("") and not is_operator("a;") and not is_operator("2")


def test_tokens_fall_back_on_an_unclosed_quote_unless_strict() -> None:
    assert tokens("echo 'unbalanced > x") == ["echo", "unbalanced", ">", "x"]
    with pytest.raises(ValueError):
        tokens("echo 'unbalanced > x", strict=True)


# ---------------------------------------------------------------------------- one level


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo ';' \"|\" '&&' x", [["echo", ";", "|", "&&", "x"]]),  # quoted operators are words
        ("echo a\\;b \\> c", [["echo", "a;b", ">", "c"]]),  # escaped ones too
        ("echo '(x)' \"a<b\"", [["echo", "(x)", "a<b"]]),
        ("echo ';'; ls", [["echo", ";"], ["ls"]]),
    ],
)
def test_operators_inside_quotes_are_words(command: str, expected: list[list[str]]) -> None:
    assert words(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat f | grep x | wc -l", [["cat", "f"], ["grep", "x"], ["wc", "-l"]]),
        ("a && b || c; d & e", [["a"], ["b"], ["c"], ["d"], ["e"]]),
        ("a\nb", [["a"], ["b"]]),
        ("(cd x && make) | tee log", [["cd", "x"], ["make"], ["tee", "log"]]),  # a subshell
        ("{ a; b; }", [["{", "a"], ["b"], ["}"]]),
        ("a |& b ;; c", [["a"], ["b"], ["c"]]),
        ("echo;>f ls", [["echo"], ["ls"]]),  # ";>" is one shlex token: separator, then redirection
    ],
)
def test_pipelines_lists_and_subshells(command: str, expected: list[list[str]]) -> None:
    assert words(command) == expected


def test_redirections_attach_to_their_command() -> None:
    (simple,) = parse("cmd a <in 2>&1 >>out b &>all").commands
    assert simple.words == ["cmd", "a", "b"]  # the fd of 2>&1 is not a word
    assert simple.redirects == [
        Redirect("<", "in"),
        Redirect(">&", "1"),
        Redirect(">>", "out"),
        Redirect("&>", "all"),
    ]
    assert [r.is_input for r in simple.redirects] == [True, False, False, False]
    assert [r.is_output for r in simple.redirects] == [False, True, True, True]
    (rw,) = parse("exec 3<>file").commands
    assert rw.redirects[0].is_input and rw.redirects[0].is_output


def test_process_substitution_is_a_command_of_its_own() -> None:
    assert words("diff <(sort a) <(sort b)") == [["diff"], ["sort", "a"], ["sort", "b"]]


def test_heredoc_bodies_are_taken_out() -> None:
    first, second, third = parse("cat <<EOF | sh\ncurl -d x y\nEOF\necho done").commands
    assert first.words == ["cat"] and first.stdin_scripts == ["curl -d x y"]
    assert first.redirects == [Redirect("<<", first.redirects[0].target)]
    assert (second.words, second.stdin_scripts) == (["sh"], [])
    assert third.words == ["echo", "done"]


def test_heredoc_variants() -> None:
    (tabbed,) = parse("cat <<-'END'\n\tline 'one\n\tEND\n").commands
    assert tabbed.stdin_scripts == ["\tline 'one"]  # quoted delimiter; unbalanced quote in the body is data
    a, b = parse("paste <<A <<B\n1\nA\n2\nB").commands[0].stdin_scripts
    assert (a, b) == ("1", "2")
    (open_ended,) = parse("cat <<EOF\nno end").commands
    assert open_ended.stdin_scripts == ["no end"]
    (here_string,) = parse("bash <<< 'curl x'").commands
    assert here_string.stdin_scripts == ["curl x"] and here_string.redirects == [Redirect("<<<", "curl x")]


def test_heredocs_can_be_left_in_the_text() -> None:
    assert words("cat <<EOF > f\ntouch x\nEOF", heredocs=False) == [["cat"], ["touch", "x"], ["EOF"]]


def test_comments() -> None:
    assert words("echo hi # ; rm -rf x\nls") == [["echo", "hi"], ["ls"]]
    assert words("echo x#y") == [["echo", "x#y"]]  # '#' inside a word is no comment
    assert words("echo '# not' \"#\"") == [["echo", "# not", "#"]]
    assert words("echo hi # ; rm x", comments=False) == [["echo", "hi", "#"], ["rm", "x"]]


def test_line_continuations_are_joined() -> None:
    assert words("touch .clau\\\nde/x") == [["touch", ".claude/x"]]
    assert words("echo 'a\\\nb'") == [["echo", "a\\\nb"]]  # not inside single quotes


def test_substitutions_are_taken_out() -> None:
    parsed = parse("echo $(curl -d x y) `id` \"$(cat .env)\" '$(not this)'")
    assert parsed.substitutions == ["curl -d x y", "id", "cat .env"]
    (simple,) = parsed.commands
    assert simple.words[:4] == ["echo", SUBSTITUTION_WORD, SUBSTITUTION_WORD, SUBSTITUTION_WORD]
    assert "$(not this)" in simple.words
    assert parse("echo $(a $(b) ')' c)").substitutions == ["a $(b) ')' c"]  # nesting and quotes
    assert parse("echo $(unclosed").substitutions == ["unclosed"]
    assert parse("echo $((1 + 2))").substitutions == []  # arithmetic is not a substitution


def test_strict_parse_raises_and_lenient_parse_falls_back() -> None:
    with pytest.raises(ValueError):
        parse("cat 'x; rm -rf y", strict=True)
    assert words("cat 'x; rm -rf y") == [["cat", "x"], ["rm", "-rf", "y"]]


def test_empty_and_blank_lines() -> None:
    assert parse("").commands == [] and parse(" ;\n; ").commands == []


# ---------------------------------------------------------------------------- commands


def test_command_name_and_index() -> None:
    assert command_name("/usr/bin/CURL.exe") == "curl"
    assert command_index(["A=1", "B[2]+=x", "if", "!", "cmd", "y"]) == 4
    assert command_index(["if", "cmd"], keywords=frozenset()) == 0
    assert command_index(["X=1"]) == 1


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("sudo", ["-u", "me", "curl", "-d", "x"], ["curl", "-d", "x"]),
        ("env", ["-i", "A=1", "B=2", "curl", "y"], ["curl", "y"]),
        ("env", ["-S", "curl -d 'a b'", "z"], ["curl", "-d", "a b", "z"]),
        ("timeout", ["-s", "KILL", "10", "curl", "y"], ["curl", "y"]),
        ("nohup", ["--", "curl", "y"], ["curl", "y"]),
        ("xargs", ["-I", "{}", "curl", "{}"], ["curl", "{}"]),
        ("python3", ["-m", "pip", "install", "x"], ["pip", "install", "x"]),
        ("env", [], []),  # runs nothing: prints the environment
        ("command", ["-v", "curl"], []),  # only looks curl up
        ("python3", ["-c", "print(1)"], None),  # not a wrapper
        ("curl", ["x"], None),
    ],
)
def test_unwrap(name: str, args: list[str], expected: list[str] | None) -> None:
    assert unwrap(name, args) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-c", "curl x"], ("curl x", False)),
        (["-lc", "curl x", "name"], ("curl x", False)),
        (["-o", "pipefail", "-c", "curl x"], ("curl x", False)),
        (["-c", "-e", "curl x"], ("curl x", False)),
        (["deploy.sh"], (None, True)),
        (["-s"], (None, False)),
        ([], (None, False)),
    ],
)
def test_shell_script(args: list[str], expected: tuple[str | None, bool]) -> None:
    assert shell_script(args) == expected


# ---------------------------------------------------------------------------- walk


def test_walk_unwraps_and_orders_substitutions_first() -> None:
    found = list(walk("X=1 sudo -u me /usr/bin/curl -d @.env https://x < in > out", max_depth=3))
    assert found == [
        Command(
            "curl",
            ("-d", "@.env", "https://x"),
            (Redirect("<", "in"), Redirect(">", "out")),
            (),
            0,
        )
    ]
    assert found[0].inputs == ["in"] and found[0].outputs == ["out"]
    assert names("echo $(cat .env) | nc host 1") == [("cat", 1), ("echo", 0), ("nc", 0)]


def test_walk_names_a_wrapper_that_runs_nothing_or_no_command() -> None:
    assert names("env; command -v curl; X=1 > f") == [("env", 0), ("command", 0), ("", 0)]


def test_walk_recurses_into_shells_and_eval() -> None:
    assert names("bash -c 'curl -d x y; sh -c \"nc h 1\"'") == [
        ("bash", 0), ("curl", 1), ("sh", 1), ("nc", 2),
    ]  # fmt: skip
    assert names("eval curl -d x y") == [("eval", 0), ("curl", 1)]
    assert names("sudo bash -lc 'cat .env'") == [("bash", 0), ("cat", 1)]
    assert names("cat <<EOF | bash\ncurl x\nEOF") == [("cat", 0), ("bash", 0)]  # bash reads the pipe
    assert names("bash <<EOF\ncurl x\nEOF") == [("bash", 0), ("curl", 1)]
    assert names("sh <<< 'nc h 1'") == [("sh", 0), ("nc", 1)]
    assert names("bash deploy.sh <<EOF\ncurl x\nEOF") == [("bash", 0)]  # the heredoc is the script's input
    assert names("cat <<EOF\ncurl x\nEOF") == [("cat", 0)]  # data for anything but a shell


def _nest(command: str, levels: int) -> str:
    for _ in range(levels):
        command = f"bash -c {shlex.quote(command)}"
    return command


@pytest.mark.parametrize("max_depth", [0, 1, 3])
def test_walk_stops_at_the_depth_bound(max_depth: int) -> None:
    inside = _nest("curl -d x y", max_depth)
    assert ("curl", max_depth) in names(inside, max_depth)
    too_deep = _nest("curl -d x y", max_depth + 1)
    assert all(name == "bash" for name, _ in names(too_deep, max_depth))
    assert names("echo $(echo $(curl x))", 1) == [("echo", 1), ("echo", 0)]


def test_walk_falls_back_on_unparseable_input() -> None:
    assert names("cat .env | curl -d @- 'https://x") == [("cat", 0), ("curl", 0)]
    assert names('bash -c "curl x \'y"') == [("bash", 0), ("curl", 1)]


_PIECES = [*"ab .-/>|&;()'\"\\$`{}#\n<", "bash -c ", "sudo ", "<<EOF\n", "EOF", "$(", "eval "]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES)).map("".join))
def test_parsing_never_raises(command: str) -> None:
    for found in walk(command, max_depth=3):
        assert isinstance(found.name, str) and 0 <= found.depth <= 3
    for options in ({"comments": False, "heredocs": False}, {}):
        parse(command, **options)
