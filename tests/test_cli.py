"""The `actorflow` command's rough edges (issue 19): --version, help with defaults, aligned tables,
scenarios found by name in a wheel, scenario files checked against a typed schema with one-line errors,
the sim report's plot, Windows-safe imports, logging's quiet default, and `actorflow graph show`.
(`cluster up/status/down` run real clusters: tests/test_cluster_cli.py.)"""
from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pytest

import actorflow as af
from actorflow.cli import build_parser, main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _walk(parser, path):
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _walk(sp, path + [name])


# -- version, help, demo --------------------------------------------------------------------------------------

def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert re.match(rf"actorflow {re.escape(af.version.ACTORFLOW_VERSION)} \(Python 3\.\d+", capsys.readouterr().out)


def test_every_option_of_every_subcommand_has_help_and_shows_its_default():
    parsers = list(_walk(build_parser(), ["actorflow"]))
    names = {" ".join(p) for p, _ in parsers}
    for cmd in ("actorflow demo", "actorflow cluster up", "actorflow cluster down", "actorflow sim run",
                "actorflow graph show", "actorflow serve", "actorflow worker"):
        assert cmd in names
    checked = 0
    for path, parser in parsers:
        text = parser.format_help()
        for a in parser._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)):
                continue
            where = f"{' '.join(path)} {a.option_strings or a.dest}"
            assert a.help, f"{where} has no help text"
            if a.option_strings and a.default not in (None, False) and not isinstance(a, argparse._StoreConstAction):
                # The default is shown right after this option's help (the formatter may wrap lines).
                flat = " ".join(text.split())
                assert f"(default: {a.default})" in flat, f"{where}: its default {a.default!r} is not shown"
                checked += 1
    assert checked > 30


def test_cluster_up_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["cluster", "up", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "parameter server tasks (default: 1)" in out
    assert "worker tasks (default: 2)" in out
    assert "(default: .actorflow)" in out


def test_demo_has_a_description(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    assert "Builds a small graph" in out and "while_loop" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert re.search(r"demo\s+build and run a small graph", capsys.readouterr().out)


# -- tables ---------------------------------------------------------------------------------------------------

def test_tables_align_columns_whatever_the_widths():
    from actorflow.console import print_table
    buf = io.StringIO()
    print_table(["task", "address", "state"], [("/job:ps/task:0", "127.0.0.1:1", "healthy"),
                                               ("/job:worker/task:10", "127.0.0.1:65000", "DOWN")], file=buf)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3
    starts = [[m.start() for m in re.finditer(r"(?<=\s\s)\S+", line)] for line in lines]
    assert starts[0] == starts[1] == starts[2], lines     # every column starts at the same offset
    assert all(line == line.rstrip() for line in lines)


# -- Windows-safe imports -------------------------------------------------------------------------------------

WINDOWS_LIKE = textwrap.dedent("""
    import signal, sys
    keep = {"SIGINT", "SIGTERM", "SIGABRT", "SIGFPE", "SIGILL", "SIGSEGV"}
    for name in dir(signal):
        if name.startswith("SIG") and not name.startswith("SIG_") and name not in keep:
            delattr(signal, name)            # Windows' signal module has none of these
    for mod in ("fcntl", "resource", "pwd", "grp", "termios", "pty", "tty", "uvloop"):
        sys.modules[mod] = None              # nor these modules
    import actorflow, actorflow.cli, actorflow.cluster.local, actorflow.cluster.ray_cluster
    import actorflow.sim.cli, actorflow.sim.faults, actorflow.sim.runner, actorflow.graphviz
    import actorflow.kernels.cpu.io, actorflow.checkpoint_format
    assert not hasattr(signal, "SIGKILL")
    actorflow.cli.build_parser()
    print("imported")
""")


def test_import_without_posix_only_signals_and_modules():
    """`import actorflow` on Windows: no signal.SIGKILL (it was a default argument), no fcntl."""
    r = subprocess.run([sys.executable, "-c", WINDOWS_LIKE], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "imported" in r.stdout


def test_temp_file_locks_degrade_without_fcntl(tmp_path, monkeypatch):
    from actorflow import checkpoint_format as cio
    monkeypatch.setattr(cio, "fcntl", None)
    fd = cio._open_temp(str(tmp_path / "x.tmp-1"))      # no lock, but no error either
    os.close(fd)
    with pytest.raises(OSError):
        cio._flock(0)


# -- logging ----------------------------------------------------------------------------------------------------

def test_logging_is_quiet_by_default_but_shows_warnings():
    code = textwrap.dedent("""
        import logging, actorflow as af
        log = logging.getLogger("actorflow.some.module")
        log.info("an info record")
        log.warning("a warning record")
        af.logging.set_verbosity(af.logging.INFO)
        log.info("info after set_verbosity")
        print(af.logging.get_verbosity() == af.logging.INFO)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr
    assert "a warning record" in r.stderr
    assert "an info record" not in r.stderr + r.stdout
    assert "info after set_verbosity" in r.stderr
    assert r.stdout.strip() == "True"


# -- scenarios: found by name, packaged, validated ------------------------------------------------------------

def test_scenarios_are_found_by_name(tmp_path, monkeypatch):
    from actorflow.sim.scenario import ScenarioError, find, packaged_dir
    monkeypatch.chdir(tmp_path)                         # no ./sims here
    assert find("worker_crash") == os.path.join(packaged_dir(), "worker_crash.toml")
    assert find("worker_crash.toml") == os.path.join(packaged_dir(), "worker_crash.toml")
    # A project's own ./sims comes first, then --dir before that.
    (tmp_path / "sims").mkdir()
    (tmp_path / "sims" / "worker_crash.toml").write_text('[workload]\nsteps = 10\n')
    assert os.path.samefile(find("worker_crash"), tmp_path / "sims" / "worker_crash.toml")
    with pytest.raises(ScenarioError, match=r"no scenario named 'wokrer_crash'; known: .*worker_crash"):
        find("wokrer_crash")


def _sim(capsys, *args):
    rc = main(["sim", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("body, expected", [
    ('[workload]\nsteps = "600"\n', r"workload\.steps: expected an integer, got \"600\" \(a string\)"),
    ('[workload]\nstesp = 600\n', r"workload\.stesp: unknown key; allowed: .*steps"),
    ('[expect]\nnothing_lost = 1\n', r"expect\.nothing_lost: expected true or false, got 1 \(an integer\)"),
    ('[[faults]]\nkind = "kill"\ntask = "worker:1"\nat = "0.4"\n', r"faults\[0\]\.at: expected a number, got \"0.4\""),
    ('[short]\nworkload = { steps = "6" }\n', r"short\.workload\.steps: expected an integer"),
    ('[workload\nsteps = 1\n', r"not valid TOML"),
])
def test_a_bad_scenario_is_one_line_naming_file_key_and_type(tmp_path, capsys, body, expected):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    rc, out, err = _sim(capsys, "run", str(path), "--quiet")
    assert rc == 2
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"actorflow sim run: {path}: ")
    assert re.search(expected, err), err
    # `sim list` reports it as invalid too, instead of passing it and crashing later.
    rc, out, err = _sim(capsys, "list", "--dir", str(tmp_path))
    assert rc == 1 and re.search(r"bad\s+INVALID", out) and re.search(expected, err)


def test_a_missing_scenario_file_is_one_line(tmp_path, capsys):
    rc, out, err = _sim(capsys, "run", str(tmp_path / "nope.toml"))
    assert rc == 2 and err.strip() == f"actorflow sim run: {tmp_path / 'nope.toml'}: no such scenario file"
    rc, out, err = _sim(capsys, "run", "no_such_scenario")
    assert rc == 2 and "no scenario named 'no_such_scenario'; known:" in err and "worker_crash" in err
    rc, out, err = _sim(capsys, "replay", str(tmp_path))
    assert rc == 2 and "not a recorded run" in err and len(err.strip().splitlines()) == 1


def test_the_cli_prints_no_traceback_for_a_bad_scenario(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[workload]\nsteps = "600"\n')
    r = subprocess.run([sys.executable, "-m", "actorflow.cli", "sim", "run", str(path)], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 2
    assert r.stderr.strip() == f'actorflow sim run: {path}: workload.steps: expected an integer, got "600" (a string)'


def test_every_packaged_scenario_passes_the_schema():
    from actorflow.sim.scenario import available, load
    found = available()
    assert {"worker_crash", "ps_crash", "partition_heals"} <= set(found)
    for name, path in found.items():
        assert load(path).name == name
        load(path, short=True)


def test_the_wheel_ships_the_scenarios_and_finds_them_by_name(tmp_path):
    """A wheel (not an editable install) holds actorflow/sim/scenarios/*.toml, and `sim list` run from
    the unpacked wheel, in a folder without sims/, lists them."""
    def build(*isolation):
        return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w",
                               str(tmp_path / "dist"), ROOT], capture_output=True, text=True, timeout=600)
    r = build("--no-build-isolation")
    if r.returncode != 0:       # this environment's setuptools cannot build wheels: pip's isolated build can
        r = build()
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("actorflow-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(tmp_path / "site")
    shipped = {os.path.basename(n) for n in names if n.startswith("actorflow/sim/scenarios/")}
    assert {f for f in os.listdir(os.path.join(ROOT, "actorflow", "sim", "scenarios"))
            if f.endswith(".toml")} <= shipped
    assert not any(n.startswith("sims/") for n in names)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import actorflow, sys; from actorflow.cli import main; print(actorflow.__file__); "
            "sys.exit(main(['sim', 'list']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=elsewhere,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[0].startswith(str(tmp_path / "site"))
    assert re.search(r"^worker_crash\s+1 ps, 3 workers", r.stdout, re.M), r.stdout


# -- the sim report's plot ----------------------------------------------------------------------------------------

def _fake_result(tmp_path, outlier_ms=4000.0):
    from types import SimpleNamespace
    rng = np.random.default_rng(0)
    steps = []
    for w in range(3):
        t = 0.0
        for i in range(120):
            dt = outlier_ms / 1e3 if (i == 0 and w == 0) else float(rng.uniform(0.008, 0.012))
            steps.append((w, i, 0, t, t + dt, 2.0 / (1 + i)))
            t += dt
    events = [{"kind": "run_start", "t": 100.0}, {"kind": "kill", "t": 100.5, "task": "/job:worker/task:1"},
              {"kind": "restart", "t": 101.0}, {"kind": "recovery", "t": 101.2}]
    sc = SimpleNamespace(name="fake", description="", ps=1, workers=3, workload=SimpleNamespace(
        mode="async", backup_workers=0, steps=120), short=False)
    return SimpleNamespace(scenario=sc, metrics={"steps": steps, "seed": 1}, events=events, passed=True,
                           out_dir=str(tmp_path), checks=[])


def test_marker_colours_differ_from_worker_colours_and_outliers_are_marked(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.colors as mcolors

    from actorflow.sim.report import timeline_figure
    fig = timeline_figure(_fake_result(tmp_path))
    ax1 = fig.axes[0]
    workers = {mcolors.to_hex(line.get_color()) for line in ax1.lines if str(line.get_label()).startswith("worker")}
    marks = {line.get_gid(): mcolors.to_hex(line.get_color()) for line in ax1.lines
             if str(line.get_gid()).startswith("mark:")}
    assert len(workers) == 3
    assert {"mark:kill", "mark:restart", "mark:recovery"} <= set(marks)
    assert not workers & set(marks.values()), (workers, marks)
    assert len(set(marks.values())) == len(marks)          # restart and recovery are told apart too
    # The 4 s first step does not set the scale: the y range stays near the 10 ms steps, and the
    # outlier is drawn at the top edge and counted in the legend.
    lo, hi = ax1.get_ylim()
    assert hi < 200 and lo < 8
    out = [line for line in ax1.lines if line.get_gid() == "outliers"]
    assert len(out) == 1 and len(out[0].get_xdata()) == 1
    assert out[0].get_ydata()[0] <= hi
    assert "1 off the scale (max 4000 ms)" in out[0].get_label()


def test_robust_range_keeps_everything_when_nothing_is_far_out():
    from actorflow.sim.report import robust_range
    lo, hi, out = robust_range([10, 11, 12, 9, 30])
    assert out == [] and hi >= 30 and lo <= 9
    lo, hi, out = robust_range([10.0] * 99 + [5000.0])
    assert out == [5000.0] and hi < 5000


def test_without_matplotlib_the_cli_says_why_there_is_no_plot(tmp_path, monkeypatch, capsys):
    from actorflow.sim import cli as sim_cli
    from actorflow.sim.report import write_report
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    res = _fake_result(tmp_path)
    res.plot_note = write_report(res)
    assert "matplotlib is not installed" in res.plot_note
    assert "matplotlib is not installed" in (tmp_path / "report.md").read_text()
    sim_cli._summary(res)
    out = capsys.readouterr().out
    assert "note: the report has no timeline plot: matplotlib is not installed (pip install 'actorflow[sim]')" in out


# -- actorflow graph show ---------------------------------------------------------------------------------------

def _graph():
    g = af.Graph()
    with g.as_default():
        with af.device("/job:ps/task:0"):
            w = af.Variable(np.ones((3, 2), np.float32), name="w")
        with af.device("/job:worker/task:0"):
            with af.name_scope("layer"):
                x = af.placeholder(af.float32, [None, 3], name="x")
                af.nn.relu(af.matmul(x, w))
            with af.name_scope("loop"):
                af.while_loop(lambda i, f: i < 5, lambda i, f: (i + 1, f * 2.0), [af.constant(0), af.constant(1.0)])
    return g


SVG = "{http://www.w3.org/2000/svg}"


def _svg_groups(path, cls):
    root = ET.parse(path).getroot()
    return [(g.find(f"{SVG}title").text, g) for g in root.iter(f"{SVG}g") if g.get("class") == cls]


@pytest.mark.parametrize("kind", ["pbtxt", "pb", "meta"])
def test_graph_show_renders_scopes_devices_and_frames(tmp_path, capsys, kind):
    pytest.importorskip("tensorboard")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz)")
    from actorflow.graphviz import device_colours
    g = _graph()
    if kind == "meta":
        af.train.export_meta_graph(str(tmp_path / "g.meta"), graph=g)
        src = tmp_path / "g.meta"
    else:
        src = af.train.write_graph(g, str(tmp_path), f"g.{kind}", as_text=kind == "pbtxt")
    assert main(["graph", "show", str(src)]) == 0
    out = capsys.readouterr().out
    svg = tmp_path / "g.svg"
    assert f"wrote {svg}" in out and "1 control-flow frames" in out and "2 devices" in out
    gd = g.as_graph_def()
    nodes = dict(_svg_groups(svg, "node"))
    for n in gd.node:                                   # every op is drawn, once
        assert n.name in nodes
    clusters = {}
    for _, grp in _svg_groups(svg, "cluster"):
        label = " ".join(t.text for t in grp.iter(f"{SVG}text"))
        clusters[label] = grp
    assert {"layer", "loop", "while", "w", "while frame loop/while", "devices"} <= set(clusters), clusters.keys()
    # The frame's box is dashed and holds the loop's ops, from Enter to Exit.
    frame = clusters["while frame loop/while"]
    assert "stroke-dasharray" in ET.tostring(frame, encoding="unicode")
    colours = device_colours(gd)
    assert set(colours) == {"/job:ps/task:0", "/job:worker/task:0"}

    def fill(name):
        shape = next(e for e in nodes[name].iter() if e.tag in (f"{SVG}path", f"{SVG}polygon", f"{SVG}ellipse"))
        return shape.get("fill").lower()
    assert fill("w") == colours["/job:ps/task:0"]
    assert fill("layer/MatMul") == colours["/job:worker/task:0"]
    assert fill("w") != fill("layer/MatMul")


def test_graph_show_frames_follow_enter_and_exit():
    pytest.importorskip("tensorboard")
    from actorflow.graphviz import frames_of
    frames = frames_of(_graph().as_graph_def())
    assert frames["loop/while/Enter"] == ("loop/while",)
    assert frames["loop/while/Merge"] == ("loop/while",)
    assert frames["loop/while/add"] == ("loop/while",)
    assert frames["loop/while/Exit"] == ("loop/while",)
    assert frames["layer/MatMul"] == ()
    nested = af.Graph()
    with nested.as_default():
        af.while_loop(lambda i: i < 3, lambda i: af.while_loop(lambda j: j < i, lambda j: j + 1, [i]) + 1,
                      [af.constant(0)])
    fr = frames_of(nested.as_graph_def())
    assert max(len(f) for f in fr.values()) == 2


def test_graph_show_dot_format_needs_no_graphviz_and_bad_files_are_one_line(tmp_path, capsys, monkeypatch):
    pytest.importorskip("tensorboard")
    src = af.train.write_graph(_graph(), str(tmp_path), "g.pbtxt")
    monkeypatch.setenv("PATH", str(tmp_path))            # no dot on the PATH
    assert main(["graph", "show", src, "--format", "dot", "-o", str(tmp_path / "g.dot")]) == 0
    text = (tmp_path / "g.dot").read_text()
    assert text.startswith("digraph G {") and "subgraph cluster_" in text and '"layer/MatMul"' in text
    capsys.readouterr()
    assert main(["graph", "show", src]) == 1
    assert "Graphviz's `dot` is not installed" in capsys.readouterr().err
    (tmp_path / "junk.pb").write_bytes(b"\x00\x01garbage")
    assert main(["graph", "show", str(tmp_path / "junk.pb")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"actorflow graph show: {tmp_path / 'junk.pb'}: not a graph") and len(err.splitlines()) == 1
    assert main(["graph", "show", str(tmp_path / "missing.pb")]) == 2
    assert "missing.pb: no such file" in capsys.readouterr().err
