"""What the `actorflow` command prints besides plain lines: aligned tables (rich), and the help
formatter every subcommand shares (each option's default shown).

Library code never prints (it logs); the CLI modules (actorflow/cli.py, sim/cli.py)
print their tables through `print_table`, so that columns line up whatever the width of a job name
or an address, on a terminal and in a log file alike.
"""
from __future__ import annotations

import argparse
import sys

__all__ = ["HelpFormatter", "print_table", "subparser"]


def print_table(columns, rows, title: str | None = None, file=None) -> None:
    """Prints `rows` (sequences of cells, any type) under `columns` (header strings) as a table whose
    columns are padded to their widest cell. Without a terminal (a pipe, a log) nothing is wrapped or
    coloured, so each row stays on one line that grep and scripts can read."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    file = file or sys.stdout
    terminal = hasattr(file, "isatty") and file.isatty()
    table = Table(*columns, title=title, box=box.SIMPLE_HEAD if terminal else None, show_edge=False,
                  pad_edge=False, header_style="bold" if terminal else "", title_justify="left")
    for row in rows:
        table.add_row(*("" if c is None else str(c) for c in row))
    if terminal:
        Console(file=file, highlight=False).print(table)     # long cells wrap within the terminal's width
        return
    console = Console(file=file, highlight=False, width=1 << 14, color_system=None)
    with console.capture() as cap:
        console.print(table)
    file.write("\n".join(line.rstrip() for line in cap.get().splitlines()) + "\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, except where there is none to show (None, a flag's
    False): those say in words what happens without them."""

    def _get_help_string(self, action):
        if action.default in (None, False) or isinstance(action, argparse._StoreConstAction):
            return action.help
        return super()._get_help_string(action)


def subparser(sub, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand whose --help shows each option's default (for sim/cli.py and serving/cli.py too)."""
    return sub.add_parser(name, help=help, description=description or help[:1].upper() + help[1:] + ".",
                          formatter_class=HelpFormatter)
