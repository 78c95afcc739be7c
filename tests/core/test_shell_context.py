"""``{params.NAME}`` in ``cmd`` is safe wherever it stands: each context × each hostile
value really runs through ``/bin/sh`` (and bash in POSIX mode) and runs nothing but the
command, which prints the value back exactly; contexts no quoting makes safe are refused."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dagq.core.params import cmd_problems, render_cmd
from dagq.core.shell_context import DOUBLE, SINGLE, WORD, Slot, scan

SHELLS = [["/bin/sh", "-c"]] + ([["bash", "--posix", "-c"]] if shutil.which("bash") else [])

HOSTILE = [
    "$(touch pwned)", "`touch pwned`", "; touch pwned", "| touch pwned", "& touch pwned",
    "'", '"', "a'; touch pwned; '", 'a"; touch pwned; "', "'\"$(touch pwned)\"'",
    "x\ntouch pwned", "\n", "\\", "\\\"$(touch pwned)", "a\\", "$HOME", "${IFS}", "*", "~",
    "-n", "", " lead and trail ", "#", "!", "\t", "{params.p}", "'$(touch pwned)'",
    "\"`touch pwned`\"", "$((1+1))", "<(touch pwned)", ">pwned", "é ✓",
]

CONTEXTS = {  # template -> what it prints for value v
    "printf %s {params.p}": "{v}",
    "printf %s '{params.p}'": "{v}",
    'printf %s "{params.p}"': "{v}",
    'printf %s "x{params.p}y"': "x{v}y",
    "printf %s x{params.p}y": "x{v}y",
    "printf %s a'b'\"c{params.p}d\"'{params.p}'{params.p}": "abc{v}d{v}{v}",
    "printf %s {params.p}{params.p}": "{v}{v}",
    "X={params.p}; printf %s \"$X\"": "{v}",
    'X="$(printf %s. "{params.p}")"; printf %s "${X%.}"': "{v}",  # $() drops end newlines
    "printf %s $(printf %s {params.p}) | tr -d '\\n'": None,  # word-split: only no-run
    "# it's a comment, with \"quotes\" `and` $(more)\nprintf %s {params.p}": "{v}",
    "echo x > /dev/null # it's\nprintf %s '{params.p}' # {{params.p}} too": "{v}",
    "printf %s \\\n  {params.p}": "{v}",
    "printf '%s' \"{params.p}\"'{params.p}'": "{v}{v}",
    "printf %s \"it's {params.p}\"": "it's {v}",
    "printf %s 'say \"{params.p}\"'": 'say "{v}"',
    "printf %s \"$(echo ')')\" {params.p}": "){v}",
    "f() { printf %s \"$1\"; }; f {params.p}": "{v}",
    "case {params.p} in *) printf %s {params.p};; esac": "{v}",
    "printf %s {{params.p}}": "{params.p}",
    "printf %s \"$((1 + 2))\"{params.p}": "3{v}",
    "[[ a == a ]] 2>/dev/null; printf %s {params.p}": "{v}",
    "printf %s {params.p} # it's the end": "{v}",
    "eval true; printf %s {params.p}": "{v}",
    "a[1]=2 2>/dev/null; x[1] 2>/dev/null; printf %s {params.p}": "{v}",
    "eval true\nprintf %s {params.p}": "{v}",
}


def run(shell: list[str], cmd: str, cwd: Path) -> str:
    out = subprocess.run([*shell, cmd], capture_output=True, text=True, cwd=cwd, timeout=10,
                         check=False)
    assert out.returncode == 0, (cmd, out.stderr)
    return out.stdout


@pytest.mark.parametrize("template", list(CONTEXTS))
@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_runs_nothing_and_reads_back_exactly(template: str, value: str,
                                                              tmp_path: Path) -> None:
    assert list(cmd_problems(template)) == []
    cmd = render_cmd(template, {"p": value})
    for shell in SHELLS:
        printed = run(shell, cmd, tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == [], (shell, cmd)
        expected = CONTEXTS[template]
        if expected is not None:
            assert printed == expected.replace("{v}", value), (shell, cmd)


def test_non_text_values_are_written_as_compact_json(tmp_path: Path) -> None:
    values = {"n": 5, "f": 0.5, "b": True, "l": ["a'b", "$(touch pwned)"], "o": {"k": "`x`"}}
    shown = {"n": "5", "f": "0.5", "b": "true", "l": '["a\'b","$(touch pwned)"]',
             "o": '{"k":"`x`"}'}
    for name, text in shown.items():
        for template in ("printf %s {params.NAME}", "printf %s \"{params.NAME}\""):
            cmd = render_cmd(template.replace("NAME", name), values)
            assert run(SHELLS[0], cmd, tmp_path) == text
    assert not list(tmp_path.iterdir())


REFUSED = {
    "printf %s `echo {params.p}`": "inside backquotes",
    'printf %s "`echo {params.p}`"': "inside backquotes",
    "echo hi # {params.p}": "inside a comment",
    "echo ${X:-{params.p}}": "inside ${...}",
    'echo "${X:-{params.p}}"': "inside ${...}",
    "echo $(( {params.p} + 1 ))": "inside arithmetic",
    "(( n = {params.p} ))": "inside arithmetic",
    "echo $[{params.p}]": "inside arithmetic $[...]",
    "[[ {params.p} -eq 1 ]]": "inside [[ ... ]]",
    '[[ "{params.p}" -eq 1 ]]': "inside [[ ... ]]",
    "eval printf %s {params.p}": "in an eval command",
    "a[{params.p}]=1": "name[...] array subscript",
    "a['{params.p}']=1; a[1]=2": "name[...] array subscript",
    "a[(1) + {params.p}]=1": "name[...] array subscript",
    "a[b[1]{params.p}]=1": "name[...] array subscript",
    'x=1 eval "echo {params.p}"': "in an eval command",
    "echo $'{params.p}'": "inside $'...'",
    'echo $"{params.p}"': 'inside $"..."',
    "echo \\{params.p}": "right after a backslash",
    'echo "\\{params.p}"': "right after a backslash",
    "echo ${params.p}": "right after a '$'",
    'echo "${params.p}"': "right after a '$'",
    "cat <<EOF\n{params.p}\nEOF": "after a here-document",
    "cat <<'EOF'\n{params.p}\nEOF\necho {params.p}": "after a here-document",
    "cat <<< x; echo {params.p}": "after a here-document",
    "x=$(case a in a) echo;; esac); echo {params.p}": "after a 'case' inside $(...)",
    "echo ${X:-'a'} {params.p}": "after quotes or a backslash inside ${...}",
    "echo $'a\\'b' {params.p}": "after a backslash inside $'...'",
    "echo $((1) {params.p}": "not closed by '))'",
    "echo 'unclosed {params.p}": "unclosed '...'",
    'echo "unclosed {params.p}': 'unclosed "..."',
    "echo $(echo {params.p}": "unclosed $(...)",
}


@pytest.mark.parametrize("template", list(REFUSED))
def test_contexts_no_quoting_makes_safe_are_refused(template: str) -> None:
    found = list(cmd_problems(template))
    assert found and all(REFUSED[template] in m for m in found), found
    assert "give it through env instead" in found[0]
    with pytest.raises(ValueError, match=r"kwargs\.cmd: "):
        render_cmd(template, {"p": "$(touch pwned)"})


def test_the_scanner_names_contexts_and_lines() -> None:
    pieces = scan("a {params.x} '{params.y}'\n\"{params.z}\" {{params.w}} {params.v}",
                  names={"x", "y", "z"})
    slots = [p for p in pieces if isinstance(p, Slot)]
    assert [(s.name, s.line, s.context) for s in slots] == [
        ("x", 1, WORD), ("y", 1, SINGLE), ("z", 2, DOUBLE)]
    assert pieces[-1] == '" {params.w} {params.v}'  # literal and unknown stay text
    assert "on line 3 of cmd" in next(cmd_problems("true\ntrue\necho `{params.p}`"))
    assert "line" not in next(cmd_problems("echo `{params.p}`")).split(",")[0]
