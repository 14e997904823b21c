"""Every command the README and docs/ show runs as written: ``syncheck ...``, ``fod ...`` and ``python -m ...`` of
this repository, taken from code spans and code blocks. Each one's ``--help`` works, every ``--option`` it uses is an
option of that command, and it passes no more positional arguments than the command takes. In process (click's
runner; a benchmark's own argument parser), so the whole test stays under a minute."""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUR_MODULES = ("benchmarks.", "syncheck.", "fod.")
#: a code span or a line of a code block, up to a shell separator: where a command starts
START = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:\.venv/bin/|\$\s*)?(syncheck|fod|python -m)\s")


def code_texts(text: str) -> list[str]:
    """The lines of fenced code blocks and the inline code spans of the prose."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            out.append(line.strip())
        else:
            out += re.findall(r"`([^`]+)`", line)
    return out


def doc_commands() -> list[tuple[str, list[str]]]:
    """``(where, argv)`` of every command of ours: argv starts with ``syncheck``, ``fod`` or a module name."""
    found: dict[tuple[str, ...], str] = {}
    for path in FILES:
        for text in code_texts(path.read_text(encoding="utf-8")):
            for part in re.split(r"\s*(?:&&|\|\||;|\|\s)\s*", text.split(" # ")[0]):
                match = START.match(part.strip())
                if not match:
                    continue
                try:
                    words = shlex.split(part.strip()[match.start(1):])
                except ValueError:  # an unclosed quote in a shortened example
                    words = part.strip()[match.start(1):].split()
                words = [w.strip("[]") for w in words if w.strip("[]") not in ("", "...", "\\")]
                if words[:2] == ["python", "-m"]:
                    words = words[2:]
                    if not words or not words[0].startswith(OUR_MODULES):
                        continue
                found.setdefault(tuple(words), f"{path.relative_to(ROOT)}: `{part.strip()}`")
    return [(where, list(argv)) for argv, where in found.items()]


def click_command(argv: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The click command ``argv`` names (``syncheck verifier train`` -> that subcommand), its path, the rest."""
    from fod.cli import main as fod_main
    from syncheck.cli import main as syncheck_main

    command: click.Command = syncheck_main if argv[0] == "syncheck" else fod_main
    path, rest = [argv[0]], argv[1:]
    while isinstance(command, click.Group) and rest and rest[0] in command.commands:
        command = command.commands[rest[0]]
        path.append(rest.pop(0))
    return command, path, rest


def click_problems(command: click.Command, rest: list[str]) -> list[str]:
    """What in ``rest`` the command would refuse: an unknown option, or a positional argument too many."""
    options = {opt: p for p in command.params if isinstance(p, click.Option) for opt in p.opts + p.secondary_opts}
    options.update({opt: click.Option(["--help"], is_flag=True) for opt in command.get_help_option_names(
        click.Context(command))})
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    room = float("inf") if any(a.nargs == -1 for a in arguments) else sum(a.nargs for a in arguments)
    problems, positional, words = [], 0, iter(rest)
    for word in words:
        if word.startswith("--"):
            name = word.split("=", 1)[0]
            if name not in options:
                problems.append(f"no option {name}")
            elif "=" not in word and not (options[name].is_flag or options[name].count):
                next(words, None)  # its value
        elif word.startswith("-") and len(word) == 2:
            if word in options and not (options[word].is_flag or options[word].count):
                next(words, None)
        elif not (isinstance(command, click.Group) or word.startswith(("<", "{"))):
            positional += 1
    if positional > room:
        problems.append(f"{positional} positional arguments, and it takes {room}")
    return problems


def argparse_parser(module_name: str) -> argparse.ArgumentParser:
    """The parser a benchmark's ``main`` builds (caught when it parses, before it runs anything)."""
    caught: list[argparse.ArgumentParser] = []

    class Caught(Exception):
        pass

    def catch(self, args=None, namespace=None):
        caught.append(self)
        raise Caught

    module = importlib.import_module(module_name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", catch)
        patch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
        with pytest.raises(Caught):
            module.main(["--help"])
    return caught[0]


COMMANDS = doc_commands()


def test_the_docs_show_commands_to_check():
    assert len(COMMANDS) > 30 and any(argv[0] == "fod" for _, argv in COMMANDS)


@pytest.mark.timeout(60)
def test_every_command_in_the_readme_and_docs_runs_as_written():
    problems = []
    runner = CliRunner()
    parsers: dict[str, argparse.ArgumentParser] = {}
    for where, argv in COMMANDS:
        if argv[0] in ("syncheck", "fod"):
            command, path, rest = click_command(argv)
            result = runner.invoke(command, ["--help"], prog_name=" ".join(path))
            if result.exit_code != 0:
                problems.append(f"{where}: `{' '.join(path)} --help` exits {result.exit_code}: {result.output[-300:]}")
            problems += [f"{where}: {' '.join(path)}: {p}" for p in click_problems(command, rest)]
            continue
        if argv[0] not in parsers:
            parsers[argv[0]] = argparse_parser(argv[0])
        parser = parsers[argv[0]]
        assert parser.format_help()
        known = parser._option_string_actions
        problems += [f"{where}: python -m {argv[0]}: no option {w.split('=')[0]}" for w in argv[1:]
                     if w.startswith("--") and w.split("=")[0] not in known]
    assert not problems, "commands in the docs that would fail as written:\n" + "\n".join(problems)


def test_the_check_sees_a_positional_argument_a_command_does_not_take():
    command, path, rest = click_command(["syncheck", "serve", "MODEL", "--device", "cuda"])
    assert path == ["syncheck", "serve"] and click_problems(command, rest) == [
        "1 positional arguments, and it takes 0"]
    command, _, rest = click_command(["syncheck", "score", "IN.jsonl", "--no-such-option"])
    assert click_problems(command, rest) == ["no option --no-such-option"]
