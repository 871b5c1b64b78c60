"""The compatibility corpus: public TF-1.x programs run under actorflow and under TensorFlow 2.21.

    python benchmarks/compat.py fetch --mirror DIR        # write the programs into the corpus directory
    python benchmarks/compat.py run --tf-python PY        # run each under both libraries, print a table

`--json` results are merged into the file if it exists, so a partial rerun (`--only`) updates it.
The programs are named in benchmarks/compat/corpus.toml (repository, commit, path) and are not copied
into this repository: `fetch` reads them with `git show COMMIT:PATH` from a clone of each repository
(a `driver` entry runs a script of benchmarks/compat/drivers/ over the repository's `files` instead),
found as DIR/<owner>+<name>/repo, DIR/<owner>+<name> or DIR/<name>. Each program is ported the same
way for both libraries (see the corpus file's header), runs in its own process in its own directory,
and its final figure is read from its output. TensorFlow runs `--seeds` times (its programs are not
seeded, so the runs differ like seeds do), actorflow `--af-runs` times; the table says whether actorflow's
figures lie within the spread of TensorFlow's runs.

Run k of either library seeds Python's and numpy's global generators with k (shims/sitecustomize.py), so
programs that draw their data with unseeded `np.random` see the same data on both sides, run by run.
The libraries' own random ops (weight initializers, dropout) draw the same numbers too: actorflow's
random kernels are TF's Philox streams and its op seeds follow TF's `get_seed`. So run k also sets the
graph seed, `tf.set_random_seed(1000 + k)` right after the import and after each
`reset_default_graph()`, in every program that does not set one itself (one that does has its seed
offset by k); `--no-graph-seed` leaves unseeded programs
unseeded. Run k of actorflow is then compared with run k of TensorFlow: "same" when every pair agrees
to 1e-4 (relative). Otherwise the figures are compared as distributions ("within", "overlap", "better",
"worse"), and with three runs a side two ranges of identically distributed figures miss each other by
chance one time in ten (2·3!3!/6!).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent / "compat"
ROOT = HERE.parent.parent
SHIMS = HERE / "shims"
DEFAULT_CORPUS = HERE / "corpus"

TF_IMPORT = "import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()"
AF_IMPORT = "import actorflow as tf"


def load_manifest(path=HERE / "corpus.toml"):
    with open(path, "rb") as f:
        return tomllib.load(f)


def _repo_dir(mirror: Path, repo: str) -> Path:
    owner, name = repo.split("/")
    for cand in (mirror / f"{owner}+{name}" / "repo", mirror / f"{owner}+{name}", mirror / name):
        if (cand / "HEAD").exists() or (cand / ".git").exists():
            return cand
    raise SystemExit(f"no clone of {repo} under {mirror} (looked for {owner}+{name}/repo, {owner}+{name}, {name})")


def notebook_script(raw: bytes) -> str:
    """A Jupyter notebook's code cells, in order, as one script (what `jupyter nbconvert --to
    script` makes of it, run top to bottom as a user runs the notebook): IPython magics and shell
    lines (`%matplotlib inline`, `!pip ...`) become `pass` with the line as a comment; a cell that ends in a bare expression
    is left as it is (its value is not printed: the programs' figures come from their prints)."""
    nb = json.loads(raw)
    cells = nb.get("cells") or [c for ws in nb.get("worksheets", []) for c in ws.get("cells", [])]
    out = []
    for k, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", cell.get("input", ""))
        src = "".join(src) if isinstance(src, list) else src
        # a magic becomes `pass` at its indentation, so that a block holding only magics stays a block
        # (`try:` around Colab's `%tensorflow_version 1.x`)
        lines = [(line[:len(line) - len(line.lstrip())] + "pass  # " + line.lstrip())
                 if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines()]
        out.append(f"# In[{k}]:\n" + "\n".join(lines) + "\n")
    return "\n".join(out)


def fetch(manifest, mirror: Path, corpus: Path) -> None:
    """Writes every program of the manifest into `corpus`, at the commit the manifest names."""
    for prog in manifest["program"]:
        repo = manifest["repos"][prog["repo"]]
        if "driver" not in prog:         # a driver is this repository's own (drivers/); it runs the files
            src = subprocess.run(["git", "-C", str(_repo_dir(mirror, repo["repo"])), "show",
                                  f"{repo['commit']}:{prog['path']}"], check=True, capture_output=True).stdout
            if prog["path"].endswith(".ipynb"):
                src = notebook_script(src).encode()
            dst = corpus / prog["id"].replace("/", "__")
            dst = dst.with_suffix(".py")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src)
        for name in prog.get("files", []):        # data files the program reads, from the same commit
            data = subprocess.run(["git", "-C", str(_repo_dir(mirror, repo["repo"])), "show",
                                   f"{repo['commit']}:{name}"], check=True, capture_output=True).stdout
            (_files_dir(corpus, prog) / Path(name).name).write_bytes(data)
        for pkg, folder in prog.get("packages", {}).items():   # the program's own modules, as a package
            names = subprocess.run(["git", "-C", str(_repo_dir(mirror, repo["repo"])), "ls-tree", "--name-only",
                                    repo["commit"], folder.rstrip("/") + "/"], check=True, capture_output=True,
                                   text=True).stdout.split()
            dst_pkg = _files_dir(corpus, prog) / "packages" / pkg
            dst_pkg.mkdir(parents=True, exist_ok=True)
            for name in names:
                if name.endswith(".py"):
                    data = subprocess.run(["git", "-C", str(_repo_dir(mirror, repo["repo"])), "show",
                                           f"{repo['commit']}:{name}"], check=True, capture_output=True).stdout
                    (dst_pkg / Path(name).name).write_bytes(data)
        print(f"fetched {prog['id']:40s} {repo['repo']}@{repo['commit'][:10]}:{prog.get('path', prog.get('files'))}")


def _files_dir(corpus: Path, prog) -> Path:
    d = corpus / (prog["id"].replace("/", "__") + ".files")
    d.mkdir(parents=True, exist_ok=True)
    return d


GRAPH_SEED_BASE = 1000


def port(source: str, lib: str, patches, seed: int = 0, graph_seed: bool = False) -> str:
    """The program as run under `lib`: the import swapped, the dataset stand-ins, the patches; a
    graph-level seed the program sets (`tf.set_random_seed(777)`) is offset by run k's `seed`, so that
    k runs of a seeded program sample its initial weights k ways. With `graph_seed`, a program that sets
    no graph seed gets `tf.set_random_seed(GRAPH_SEED_BASE + seed)` after its import."""
    imp = AF_IMPORT if lib == "actorflow" else TF_IMPORT
    inject = graph_seed and "set_random_seed" not in source
    if inject:      # a marker, replaced by the seed after the program's own seeds are offset
        imp += "; tf.set_random_seed(GRAPH_SEED)"
    out = re.sub(r"^(\s*)import tensorflow as tf\s*$", lambda m: m.group(1) + imp, source, flags=re.M)
    # TF 1.15-era programs import the v1 API by its compat path: the same path under actorflow.
    v1 = "import actorflow.compat.v1 as tf" if lib == "actorflow" else TF_IMPORT
    out = re.sub(r"^(\s*)import tensorflow\.compat\.v1 as tf\s*$", lambda m: m.group(1) + v1, out, flags=re.M)
    if lib == "actorflow":
        out = re.sub(r"^(\s*)from tensorflow\.compat\.v1 import ", lambda m: m.group(1) + "from actorflow.compat.v1 import ",
                     out, flags=re.M)
    out = re.sub(r"^(\s*)(?:from tensorflow\.examples\.tutorials\.mnist import input_data"
                 r"|import tensorflow\.examples\.tutorials\.mnist\.input_data as input_data)\s*$",
                 lambda m: m.group(1) + "import input_data", out, flags=re.M)
    if lib == "actorflow":        # `from tensorflow.python.framework import ops`: the same path under actorflow
        out = re.sub(r"^(\s*)from tensorflow\.python\.", lambda m: m.group(1) + "from actorflow.python.", out,
                     flags=re.M)
    out = re.sub(r"^(\s*)from tensorflow\.contrib import rnn\s*$",
                 lambda m: m.group(1) + "from compat_contrib import rnn", out, flags=re.M)
    if lib != "actorflow":        # TF 2.21 has no contrib: contrib.rnn's names and HParams from the shim,
        # contrib.slim, contrib.layers.linear and batch_norm from tf_slim (the bench extra), whose
        # layers are contrib.layers' code
        out = re.sub(r"^(\s*)from tensorflow\.contrib\.rnn import (.+)$",
                     lambda m: f"{m.group(1)}from compat_contrib import rnn as _contrib_rnn; "
                               + "; ".join(f"{n.strip()} = _contrib_rnn.{n.strip()}" for n in m.group(2).split(",")),
                     out, flags=re.M)
        out = re.sub(r"^(\s*)import tensorflow\.contrib\.slim as (\w+)",
                     lambda m: f"{m.group(1)}import compat_contrib; {m.group(2)} = compat_contrib.tf_slim_on_tf_2_21()", out,
                     flags=re.M)
        if re.search(r"tf\.contrib\.layers\.(linear|batch_norm)\(", out):
            out = re.sub(r"^(\s*)(import tensorflow\.compat\.v1 as tf.*)$",
                         lambda m: m.group(0) + "\n" + m.group(1) + "import compat_contrib; tf_slim = compat_contrib.tf_slim_on_tf_2_21()",
                         out, count=1, flags=re.M)
            out = re.sub(r"tf\.contrib\.layers\.(linear|batch_norm)\(", r"tf_slim.layers.\1(", out)
        out = re.sub(r"^(\s*)from tensorflow\.contrib import learn\s*$",
                     lambda m: m.group(1) + "import compat_contrib; learn = compat_contrib.contrib_learn()", out,
                     flags=re.M)
        out = re.sub(r"^(\s*)from tensorflow\.contrib\.training import HParams\s*$",
                     lambda m: m.group(1) + "from compat_contrib import HParams", out, flags=re.M)
    if lib == "actorflow":        # any other tf.contrib import: the same path under actorflow
        out = re.sub(r"^(\s*)from tensorflow\.contrib([.\s])", lambda m: m.group(1) + "from actorflow.contrib" + m.group(2),
                     out, flags=re.M)
        out = re.sub(r"^(\s*)import tensorflow\.contrib\.(\S+) as ", lambda m: f"{m.group(1)}import actorflow.contrib.{m.group(2)} as ",
                     out, flags=re.M)
    # What tf_upgrade_v2 renames for the contrib names these programs use, and numpy 2's removed
    # `newshape=` keyword and np.float / np.int / np.infty aliases: upgrades any user of TensorFlow 2.21 and numpy 2 makes, the same for both.
    if "tf.contrib.rnn." in out:
        out = re.sub(r"^(\s*)(import (?:actorflow|tensorflow\.compat\.v1) as tf.*)$",
                     lambda m: m.group(0) + "\n" + m.group(1) + "from compat_contrib import rnn", out, count=1,
                     flags=re.M)
        out = out.replace("tf.contrib.rnn.", "rnn.")
    out = out.replace("tf.contrib.layers.flatten", "tf.layers.flatten")
    out = out.replace("tf.contrib.layers.xavier_initializer()", "tf.glorot_uniform_initializer()")
    out = out.replace("newshape=", "")
    out = re.sub(r"\bnp\.(float|int)\b(?!\()", lambda m: f"np.{m.group(1)}64", out)   # numpy 2 removed the aliases
    out = re.sub(r"\bnp\.infty\b", "np.inf", out)     # and np.infty
    # No display: matplotlib's Agg backend would wait forever for a button press.
    out = out.replace("plt.waitforbuttonpress()", "None")
    out = re.sub(r"\bxrange\(", "range(", out)            # 2to3, for the programs written for Python 2
    if inject:      # a fresh default graph has no seed: give it the run's again
        out = re.sub(r"^(\s*)(\S.*\breset_default_graph\(\)\s*)$",
                     lambda m: f"{m.group(1)}{m.group(2).rstrip()}; tf.set_random_seed(GRAPH_SEED)",
                     out, flags=re.M)
    if seed:
        out = re.sub(r"\btf\.set_random_seed\((\d+)\)", lambda m: f"tf.set_random_seed({int(m.group(1)) + seed})",
                     out)
    out = out.replace("tf.set_random_seed(GRAPH_SEED)", f"tf.set_random_seed({GRAPH_SEED_BASE + seed})")
    for old, new in patches:
        if old not in out:
            raise ValueError(f"patch {old!r} does not apply")
        out = out.replace(old, new)
    return out


def run_one(prog, source: str, lib: str, python: str, timeout: float, keep: Path | None = None,
            seed: int = 0, corpus: Path = DEFAULT_CORPUS, graph_seed: bool = True) -> dict:
    """Runs one program under one library in a fresh directory, numpy (and, with `graph_seed`, the
    graph) seeded with `seed`; returns its outcome and figure."""
    work = Path(tempfile.mkdtemp(prefix="afcompat-"))
    try:
        (work / "prog.py").write_text(port(source, lib, prog.get("patches", []), seed, graph_seed))
        for name in prog.get("files", []):
            src = _files_dir(corpus, prog) / Path(name).name
            if src.suffix == ".py":     # a module of the program's own: ported as the program is
                (work / src.name).write_text(port(src.read_text(), lib, prog.get("file_patches", {}).get(src.name, []),
                                                  seed, graph_seed))
            elif src.suffix == ".ipynb":    # a notebook a driver runs: its script, ported
                (work / (src.stem + ".py")).write_text(port(notebook_script(src.read_bytes()), lib, [], seed,
                                                            graph_seed))
            else:
                shutil.copy(src, work / src.name)
        for pkg in prog.get("packages", {}):        # its own modules, ported as the program is
            (work / pkg).mkdir()
            for src in sorted((_files_dir(corpus, prog) / "packages" / pkg).glob("*.py")):
                (work / pkg / src.name).write_text(port(src.read_text(), lib, [], seed, graph_seed))
        for name in prog.get("data", []):          # generated stand-ins for what the program downloads
            sys.path.insert(0, str(SHIMS))
            from cookbook_data import MAKERS
            from text8 import make_text8_zip
            makers = dict(MAKERS, **{"text8.zip": make_text8_zip})
            if name not in makers:
                raise ValueError(f"{prog['id']}: no stand-in for data file {name!r} (known: {sorted(makers)})")
            makers[name](work / name)
        env = dict(os.environ, AF_COMPAT_LIB=lib, MPLBACKEND="Agg", TF_USE_LEGACY_KERAS="1",
                   TF_CPP_MIN_LOG_LEVEL="2", PYTHONHASHSEED="0", AF_COMPAT_SEED=str(seed))
        paths = [str(SHIMS)] + ([str(ROOT)] if lib == "actorflow" else [])
        env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
        t0 = time.perf_counter()
        try:
            r = subprocess.run([python, "prog.py"], cwd=work, env=env, capture_output=True, text=True,
                               timeout=timeout)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or ""), f"timed out after {timeout:.0f} s"
        wall = time.perf_counter() - t0
        matches = re.findall(prog["metric"], out, flags=re.M)
        value = matches[-1] if matches else None
        if value is not None:
            try:
                value = float(value)
            except ValueError:
                pass
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            stem = prog["id"].replace("/", "__") + "." + lib + f".{seed}"
            (keep / (stem + ".out")).write_text(out + "\n--- stderr ---\n" + err)
        ok = rc == 0 and value is not None
        why = "" if ok else _why(rc, err, value)
        return {"ok": ok, "value": value, "wall": wall, "why": why, "seed": seed, "graph_seed": graph_seed}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _why(rc, err, value) -> str:
    if rc == "timeout":
        return err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Exit)\b", ln) or ln.startswith("ValueError") or "Error:" in ln:
            return ln.strip()[:160]
    if rc == 0 and value is None:
        return "ran, but printed no final figure"
    return (lines[-1].strip()[:160] if lines else f"exit {rc}")


def verdict(prog, tf_vals, af_val) -> str:
    if af_val is None or not tf_vals:
        return "-"
    kind = prog.get("kind", "higher")
    if kind == "exact" or isinstance(af_val, str):
        same = all(af_val == v or (isinstance(v, float) and isinstance(af_val, float)
                                   and abs(af_val - v) <= 1e-6 * max(1.0, abs(v))) for v in tf_vals)
        return "same" if same else "differs"
    lo, hi = min(tf_vals), max(tf_vals)
    if kind == "exact-ish":
        tol = 1e-4 * max(1.0, abs(hi))
        return "same" if lo - tol <= af_val <= hi + tol else "differs"
    if lo <= af_val <= hi:
        return "within"
    better = af_val > hi if kind == "higher" else af_val < lo
    return "better" if better else "worse"


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="write the corpus's programs from local clones")
    f.add_argument("--mirror", type=Path, required=True, help="directory holding a clone of each repository")
    f.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    r = sub.add_parser("run", help="run the corpus under actorflow and TensorFlow")
    r.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    r.add_argument("--tf-python", help="a python with tensorflow-cpu==2.21.0 and tf_keras (the bench extra); the "
                                       "gcn and xlnet drivers also need networkx and sentencepiece there")
    r.add_argument("--seeds", type=int, default=3, help="TensorFlow runs per program")
    r.add_argument("--only", nargs="*", help="program ids (substrings) to run")
    r.add_argument("--skip-actorflow", action="store_true")
    r.add_argument("--af-runs", type=int, default=1, help="actorflow runs per program (its spread beside TF's)")
    r.add_argument("--timeout", type=float, default=600)
    r.add_argument("--json", type=Path, help="write the results here as JSON")
    r.add_argument("--tf-json", type=Path, help="reuse TensorFlow's results from an earlier --json")
    r.add_argument("--af-json", type=Path, nargs="*", default=[],
                   help="reuse actorflow's results from earlier --json files (later files win): only print the table")
    r.add_argument("--keep-output", type=Path, help="keep each run's output in this directory")
    r.add_argument("--no-graph-seed", dest="graph_seed", action="store_false",
                   help="leave programs that set no graph seed unseeded (no run-k-vs-run-k pairing for them)")
    a = ap.parse_args(argv)
    manifest = load_manifest()
    if a.cmd == "fetch":
        fetch(manifest, a.mirror, a.corpus)
        return 0
    progs = [p for p in manifest["program"] if not a.only or any(s in p["id"] for s in a.only)]
    earlier = json.loads(a.tf_json.read_text()) if a.tf_json else {}
    af_earlier = {}
    for path in a.af_json:
        af_earlier.update(json.loads(path.read_text()))
    results = {}
    for prog in progs:
        path = HERE / "drivers" / prog["driver"] if "driver" in prog else \
            a.corpus / (prog["id"].replace("/", "__") + ".py")
        if not path.exists() or ("files" in prog and not _files_dir(a.corpus, prog).joinpath(
                Path(prog["files"][0]).name).exists()):
            raise SystemExit(f"{path} is missing: run `python benchmarks/compat.py fetch --mirror DIR` first")
        source = path.read_text()
        res = {"tf": earlier.get(prog["id"], {}).get("tf", []), "af": None}
        if a.tf_python and not res["tf"]:
            res["tf"] = [run_one(prog, source, "tensorflow", a.tf_python, a.timeout, a.keep_output, seed=k,
                                 corpus=a.corpus, graph_seed=a.graph_seed)
                         for k in range(a.seeds)]
        if prog["id"] in af_earlier:
            res["af"] = af_earlier[prog["id"]]["af"]
            res["af_runs"] = af_earlier[prog["id"]].get("af_runs", [res["af"]])
        elif not a.skip_actorflow:
            runs = [run_one(prog, source, "actorflow", sys.executable, a.timeout, a.keep_output, seed=k,
                            corpus=a.corpus, graph_seed=a.graph_seed)
                    for k in range(a.af_runs)]
            res["af"] = runs[0]
            res["af_runs"] = runs
        results[prog["id"]] = res
        _row(prog, res)
        sys.stdout.flush()
        if a.json:      # after every program, so that an interrupted run keeps what it measured
            merged = json.loads(a.json.read_text()) if a.json.exists() else {}
            merged[prog["id"]] = res
            a.json.write_text(json.dumps(merged, indent=1))
    _summary(progs, results)
    return 0


HEADER = f"{'program':34s} {'TF runs':>7s} {'TF figure (min..max)':>22s} {'actorflow':>10s} {'figure':>9s} " \
         f"{'vs TF':>8s} {'s TF':>6s} {'s af':>6s}"
_printed = False


def _row(prog, res):
    global _printed
    if not _printed:
        print(HEADER)
        _printed = True
    tf_ok = [r for r in res["tf"] if r["ok"]]
    tf_vals = [r["value"] for r in tf_ok]
    tf_fig = "-" if not tf_vals else (fmt(tf_vals[0]) if len(set(map(str, tf_vals))) == 1
                                      else f"{fmt(min(tf_vals))}..{fmt(max(tf_vals))}")
    af = res["af"]
    af_state = "-" if af is None else ("runs" if af["ok"] else "FAILS")
    af_val = af["value"] if af and af["ok"] else None
    more = [r["value"] for r in res.get("af_runs", []) if r["ok"]]
    paired = _paired(prog, res)
    if paired != "same" and len(more) > 1 and all(isinstance(v, float) for v in more) \
            and prog.get("kind") not in ("exact", "exact-ish"):
        lo, hi = min(more), max(more)
        if tf_vals and lo <= max(tf_vals) and hi >= min(tf_vals):
            verdict_text = "overlap"
        else:
            verdict_text = verdict(prog, tf_vals, statistics.median(more))
        print(f"{prog['id']:34s} {len(tf_ok)}/{len(res['tf']):<5d} {tf_fig:>22s} {af_state:>10s} "
              f"{fmt(lo) + '..' + fmt(hi):>9s} {verdict_text:>8s} "
              f"{fmt(statistics.median([r['wall'] for r in res['tf']]) if res['tf'] else None):>6s} "
              f"{fmt(af['wall']):>6s}  ({len(more)} actorflow runs)")
        return
    tf_wall = statistics.median([r["wall"] for r in res["tf"]]) if res["tf"] else None
    fig = af_val if paired is None or len(more) < 2 else f"{fmt(min(more))}..{fmt(max(more))}"
    print(f"{prog['id']:34s} {len(tf_ok)}/{len(res['tf']):<5d} {tf_fig:>22s} {af_state:>10s} {fmt(fig):>9s} "
          f"{paired or verdict(prog, tf_vals, af_val):>8s} {fmt(tf_wall):>6s} "
          f"{fmt(af['wall'] if af else None):>6s}" + (f"  (run k vs run k, {len(more)} seeds)" if paired else ""))
    if af and not af["ok"]:
        print(f"    actorflow: {af['why']}")
    for r in res["tf"]:
        if not r["ok"]:
            print(f"    tensorflow: {r['why']}")
            break


def _paired(prog, res):
    """Run k of actorflow against run k of TensorFlow (the same numpy seed, and the same graph seed for
    runs made with one): "same" when every pair agrees to 1e-4; for an `exact-ish` program "differs"
    otherwise, for the others None (compare as distributions). None when no runs pair up."""
    exactish = prog.get("kind") == "exact-ish"

    def by_seed(runs):
        return {r.get("seed"): r["value"] for r in runs
                if r["ok"] and r.get("seed") is not None and (exactish or r.get("graph_seed"))}
    tf_by, af_by = by_seed(res["tf"]), by_seed(res.get("af_runs", []))
    common = sorted(set(tf_by) & set(af_by))
    if not common:
        return None
    if all(_agree(tf_by[k], af_by[k]) for k in common):
        return "same"
    return "differs" if exactish else None


def _agree(want, got) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return abs(got - want) <= 1e-4 * max(1.0, abs(want))
    return want == got


def _summary(progs, results):
    tf_runs = [p for p in progs if any(r["ok"] for r in results[p["id"]]["tf"])]
    af_runs = [p for p in tf_runs if results[p["id"]]["af"] and results[p["id"]]["af"]["ok"]]
    print(f"\nTensorFlow runs {len(tf_runs)} of {len(progs)}; actorflow runs {len(af_runs)} of those {len(tf_runs)}")


if __name__ == "__main__":
    sys.exit(main())
