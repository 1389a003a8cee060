"""Shell completion through the installed console script, as a user's shell runs it.

The lines of docs/cli.md are what users paste; each shell it names must get a script,
and the script's question (the words typed so far) must be answered with command names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
#: The entry point pip installed beside this interpreter (pyproject's [project.scripts]).
SCRIPT = Path(sys.executable).parent / "zae-limiter"


def complete(variable: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)],
        capture_output=True,
        text=True,
        env={**os.environ, "_ZAE_LIMITER_COMPLETE": variable, **env},
        timeout=60,
        check=False,
    )


def documented_shells() -> list[str]:
    return re.findall(r"_ZAE_LIMITER_COMPLETE=(\w+)_source zae-limiter", DOC.read_text())


def test_the_docs_show_bash_zsh_and_fish() -> None:
    assert sorted(documented_shells()) == ["bash", "fish", "zsh"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_documented_shell_gets_a_script(shell: str) -> None:
    done = complete(f"{shell}_source")
    assert done.returncode == 0, done.stderr
    # The script calls the program back with the shell's own *_complete mode.
    assert f"_ZAE_LIMITER_COMPLETE={shell}_complete" in done.stdout


def test_a_partial_word_completes_to_the_command() -> None:
    done = complete("bash_complete", COMP_WORDS="zae-limiter ent", COMP_CWORD="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["plain,entity"]


def test_a_group_completes_to_its_subcommands() -> None:
    done = complete("bash_complete", COMP_WORDS="zae-limiter entity ", COMP_CWORD="2")
    assert done.returncode == 0, done.stderr
    offered = {line.removeprefix("plain,") for line in done.stdout.split()}
    assert {"create", "delete", "list", "shards", "show", "update"} <= offered


def test_the_documented_bash_line_completes_in_bash() -> None:
    """The docs' bash line, evaluated by bash, then its function asked as bash asks it."""
    (line,) = [
        line for line in DOC.read_text().splitlines() if "bash_source" in line and "eval" in line
    ]
    bash = shutil.which("bash")
    assert bash is not None
    script = (
        f"{line}\n"
        'COMP_WORDS=(zae-limiter limits ""); COMP_CWORD=2\n'
        "_zae_limiter_completion zae-limiter\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{SCRIPT.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [bash, "-c", script], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["apply", "bucket-ttl", "delete", "get", "set", "show"]
