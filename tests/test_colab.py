"""Colab and Kaggle: the address and tag, every link and setup cell, scripts/colab_cells.py (make
release: tests/test_release.py).

The setup cell runs for real, here and with Colab's and Kaggle's variables set: it clones the
course at its tag from a local repository standing in for GitHub (git's ``insteadOf``), and pip
runs with ``--dry-run``. Each way it can fail has its stand-in: a missing repository, one without
the tag, an address nothing answers at, and an older torch's metadata first on the path.
"""

import ast
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import nbformat
import pytest

from helpers.course import REPOSITORY, TAG
from helpers.paths import CHECKOUT_VARIABLE

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import colab_cells as tool  # noqa: E402
from colab_cells import colab_url, kaggle_url  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OWNER_AND_NAME = REPOSITORY.removeprefix("https://github.com/").strip("/")
# A link that opens a notebook of a repository at a ref, on GitHub, Colab or Kaggle:
# (owner/name, ref, file)
NOTEBOOK_LINK = re.compile(
    r"(?:github\.com|colab\.research\.google\.com/github)/([\w.-]+/[\w.-]+)"
    r"/blob/([^/\s)\"]+)/notebooks/([\w.-]+\.ipynb)"
)
PLATFORMS = ("COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE")
needs_git = pytest.mark.skipif(
    shutil.which("git") is None, reason="needs git to stand in for GitHub"
)


def _assigned(source: str) -> tuple:
    """The literals the setup cell assigns to ``repository`` and ``tag``."""
    values = {}
    for line in source.splitlines():
        name, equals, value = line.partition(" = ")
        if equals and name in {"repository", "tag"}:
            values[name] = ast.literal_eval(value.strip())
    return (values["repository"], values["tag"])


def _git(*args, cwd=None, check=True):  # as a committer named t
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=check)


def _python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_tag_is_the_pyproject_version_the_repository_is_on_github_and_the_addresses():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", REPOSITORY)
    assert re.fullmatch(r"v\d+\.\d+\.\d+", TAG) and f"v{PROJECT['version']}" == TAG
    blob = f"{OWNER_AND_NAME}/blob/{TAG}/notebooks/00_x.ipynb"
    assert colab_url("00_x.ipynb") == f"https://colab.research.google.com/github/{blob}"
    assert (
        kaggle_url("00_x.ipynb")
        == f"https://kaggle.com/kernels/welcome?src=https://github.com/{blob}"
    )
    elsewhere = colab_url("a.ipynb", repository="https://github.com/o/n.git", ref="v9")
    assert elsewhere == "https://colab.research.google.com/github/o/n/blob/v9/notebooks/a.ipynb"


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: colab_url(0), TypeError, "notebook must be a string"),
        (lambda: colab_url("a.ipynb", ref=None), TypeError, "ref must be a string"),
        (lambda: kaggle_url("a.ipynb", repository=None), TypeError, "repository must be a string"),
        (
            lambda: colab_url("a.ipynb", repository="https://gitlab.com/o/n"),
            ValueError,
            "not a GitHub",
        ),
        (lambda: kaggle_url("notebooks/a.ipynb"), ValueError, "notebook file name"),
    ],
)
def test_the_addresses_name_a_wrong_argument(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_every_link_and_setup_cell_names_the_one_address_and_tag():
    """Badges, text links and setup cells of every notebook, and the README's links: one address,
    one tag. The setup cell is a titled form, and each notebook asks Colab for a GPU runtime."""
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        cells = notebook.cells
        badge = cells[0]
        # the links as text too, not only behind the badges' images (which cannot load offline)
        text_links = [
            url for _, url in re.findall(r"(?<!!)\[([^\[\]]+)\]\(([^)]+)\)", badge.source)
        ]
        assert notebook.metadata.get("accelerator") == "GPU", path.name
        assert notebook.metadata.get("colab", {}).get("gpuType") == "T4", path.name
        kaggle = path.name in tool.KAGGLE_NOTEBOOKS
        expected = [colab_url(path.name)] + ([kaggle_url(path.name)] if kaggle else [])
        assert text_links == expected, badge.source
        assert (
            "colab-badge.svg" in badge.source and ("open-in-kaggle.svg" in badge.source) == kaggle
        )

        setup = next(cell for cell in cells if cell.cell_type == "code")
        assert setup.get("id") == tool.SETUP_ID, (
            f"{path.name}: the setup cell must be the first code cell"
        )
        assert _assigned(setup.source) == (REPOSITORY, TAG)
        assert setup.metadata.get("jupyter", {}).get("source_hidden") is True, path.name
        assert setup.metadata.get("cellView") == "form", path.name  # Colab shows its title alone
        title = setup.source.splitlines()[0]
        assert title.startswith("# @title ") and len(title) <= 80, title

        for cell in cells:  # no cell links to a notebook of another repository or at another ref
            for where, ref, _ in NOTEBOOK_LINK.findall(cell.source):
                assert (where, ref) == (OWNER_AND_NAME, TAG), (
                    f"{path.name} {cell.get('id')}: {where}@{ref}"
                )

    readme = (ROOT / "README.md").read_text()
    assert all(colab_url(path.name) in readme for path in NOTEBOOKS)
    assert all(kaggle_url(name) in readme for name in tool.KAGGLE_NOTEBOOKS)
    found = NOTEBOOK_LINK.findall(readme)
    assert found and all((where, ref) == (OWNER_AND_NAME, TAG) for where, ref, _ in found), found
    assert tool.main(["--check", *map(str, NOTEBOOKS), str(ROOT / "README.md")]) == 0


def test_setup_cell_does_nothing_on_this_machine():
    probe = tool.setup_source() + "\nimport sys\nprint('torch imported:', 'torch' in sys.modules)"
    done = _python(probe, {k: v for k, v in os.environ.items() if k not in PLATFORMS})
    assert (done.returncode, done.stdout, done.stderr) == (0, "torch imported: False\n", "")


def test_setup_cell_says_what_to_do_on_another_jupyter_without_the_helpers(tmp_path):
    """Neither Colab nor Kaggle, and no helpers: this Python without its site-packages (-S)."""
    environment = {k: v for k, v in os.environ.items() if k not in PLATFORMS}
    command = [sys.executable, "-S", "-c", tool.setup_source()]
    done = subprocess.run(
        command, env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: "), done.stderr
    assert "make lab" in last  # on a machine of one's own
    assert f"pip install git+{REPOSITORY}@{TAG}" in last  # elsewhere


def _stand_in_for_github(tmp_path, refs: list[str]) -> Path:
    """A repository holding this checkout's last commit under each of ``refs``."""
    head = _git("-C", str(ROOT), "rev-parse", "HEAD", check=False)
    if head.returncode != 0:
        pytest.skip("not a git checkout: no commit to stand in for the published release")
    remote = tmp_path / "remote"
    _git("init", "-q", str(remote))
    refspecs = [f"{head.stdout.strip()}:{ref}" for ref in refs]
    # --no-tags: a clone of a release holds its tag already, which git would also fetch, and refuse.
    # --update-shallow: in a shallow clone (GitHub's checkout) the commit is a shallow root, which
    # git otherwise leaves out, saying only a warning.
    fetch = ["fetch", "-q", "--no-tags", "--update-shallow", str(ROOT), *refspecs]
    fetched = _git("-C", str(remote), *fetch, check=False)
    assert fetched.returncode == 0, fetched.stderr
    for ref in refs:
        assert _git("-C", str(remote), "rev-parse", "--verify", ref, check=False).returncode == 0, (
            f"the stand-in for GitHub has no {ref}: {fetched.stderr}"
        )
    return remote


def _runtime(tmp_path, github: str, platform: dict) -> dict:
    """The environment of a Colab or Kaggle stand-in whose GitHub is at the address ``github`` and
    whose home is in tmp_path."""
    return {
        **{k: v for k, v in os.environ.items() if k not in PLATFORMS},
        **platform,
        "HOME": str(tmp_path / "home"),  # the setup cell fetches into ~/gpu-course/<tag>
        "PIP_DRY_RUN": "1",  # resolve and build, install nothing
        "PIP_NO_INDEX": "1",  # no network: --no-deps needs none
        "PIP_NO_BUILD_ISOLATION": "0",  # pip reads it as "no isolation": setuptools from .venv
        "PIP_LOG": str(tmp_path / "pip.log"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{github}.insteadOf",
        "GIT_CONFIG_VALUE_0": REPOSITORY,
    }


# Run after the setup cell, in its process: where helpers.recorded now finds the recorded GPU runs.
_FIND_RECORDINGS = f"""
import json
from helpers.recorded import find_recording, recordings_root
checkout = Path(os.environ[{CHECKOUT_VARIABLE!r}])
notebook = json.loads(next(iter(sorted(checkout.glob("notebooks/00_*.ipynb")))).read_text())
cells = [c for c in notebook["cells"] if c["cell_type"] == "code" and c["id"] != "colab-setup"]
shown = next(c["id"] for c in cells if "gpu-output" in c["metadata"].get("tags", []))
recording, why = find_recording(shown)
print("recordings:", recordings_root(), "|", recording.path if recording else why)
"""


@needs_git
@pytest.mark.git_refs
def test_the_stand_in_for_github_serves_this_commit_at_the_release_tag(tmp_path):
    """What the setup cell's clone needs of the stand-in, whatever this clone is (shallow,
    tagged)."""
    remote = _stand_in_for_github(tmp_path, [f"refs/tags/{TAG}"])
    checkout = tmp_path / "checkout"
    clone = ["clone", "-q", "--depth", "1", "--branch", TAG, remote.as_uri(), str(checkout)]
    _git(*clone)
    head = _git("-C", str(ROOT), "rev-parse", "HEAD").stdout
    assert _git("-C", str(checkout), "rev-parse", "HEAD").stdout == head


@needs_git
def test_setup_cell_on_a_colab_stand_in_fetches_the_tag_installs_from_it_and_finds_the_recordings(
    tmp_path,
):
    remote = _stand_in_for_github(tmp_path, [f"refs/tags/{TAG}"])
    env = _runtime(tmp_path, remote.as_uri(), {"COLAB_RELEASE_TAG": "stand-in"})
    done = _python(tool.setup_source() + _FIND_RECORDINGS, env)
    assert done.returncode == 0, done.stderr
    checkout = tmp_path / "home" / "gpu-course" / TAG
    assert (checkout / "pyproject.toml").is_file() and (checkout / "results" / "gpu").is_dir()
    described = _git("-C", str(checkout), "describe", "--tags").stdout.strip()
    assert described == TAG  # the tag, nothing newer
    log = (tmp_path / "pip.log").read_text()
    assert f"Would install {PROJECT['name']}-" in log and str(checkout) in log
    assert "Collecting torch" not in log  # --no-deps: nothing else is even looked at
    lines = done.stdout.splitlines()
    recordings = lines.pop()
    import torch  # here, not at the top: the clones' runs of this file's git tests start faster

    if torch.cuda.is_available():
        assert lines == []
    else:  # on a CPU "Colab": how to switch to a GPU
        assert len(lines) == 1 and "Change runtime type" in lines[0], lines
    # helpers.recorded reads the recorded runs of the fetched release
    assert recordings.startswith(
        f"recordings: {checkout / 'results' / 'gpu'} | {checkout / 'results'}"
    )

    # run again: the release is fetched once; with GitHub gone, the cell still succeeds
    env["GIT_CONFIG_KEY_0"] = f"url.{(tmp_path / 'gone').as_uri()}.insteadOf"
    again = _python(tool.setup_source(), env)
    assert again.returncode == 0, again.stderr


@pytest.fixture(params=["refused", "unresolved"])
def github_out_of_reach(request):
    """A GitHub address that cannot be reached: a port on this machine that refuses connections
    (bound but never listened on, and held, so no other program can take it and answer), or a
    name that never resolves."""
    if request.param == "unresolved":
        yield "https://course.invalid/"
        return
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}/"


def _failure(tmp_path, github: str, platform: dict, pythonpath: str = "") -> str:
    """The last line the setup cell writes, failing, on a runtime whose GitHub is ``github``."""
    env = _runtime(tmp_path, github, platform)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = _python(tool.setup_source(), env)
    assert done.returncode != 0, done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: "), done.stderr  # one sentence, not git's or pip's output
    assert not (tmp_path / "pip.log").exists()  # pip never ran
    home = tmp_path / "home" / "gpu-course"
    assert not home.exists() or list(home.iterdir()) == []  # no half-fetched folder left
    return last


COLAB = {"COLAB_RELEASE_TAG": "x"}
KAGGLE = {"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}


@needs_git
@pytest.mark.parametrize("platform", [COLAB, KAGGLE])
def test_setup_cell_names_a_missing_repository(tmp_path, platform):
    """GitHub answers a missing (or private) repository as "could not read Username": not a login
    problem; the cell names the address."""
    last = _failure(tmp_path, (tmp_path / "no-such-repository").as_uri(), platform)
    assert f"no public repository at {REPOSITORY}" in last
    assert "docs/publishing.md" in last  # how the course is published at an address
    assert "Internet" not in last


@needs_git
@pytest.mark.git_refs
@pytest.mark.parametrize("platform", [COLAB, KAGGLE])
def test_setup_cell_names_a_release_tag_that_was_not_pushed(tmp_path, platform):
    remote = _stand_in_for_github(tmp_path, ["refs/heads/main"])  # published, but not this release
    last = _failure(tmp_path, remote.as_uri(), platform)
    assert REPOSITORY in last and f"no tag {TAG}" in last
    assert f"git push origin {TAG}" in last  # the fix


def test_setup_cell_without_internet_says_so_and_on_kaggle_where_to_turn_it_on(
    tmp_path, github_out_of_reach
):
    on_colab = _failure(tmp_path, github_out_of_reach, COLAB)
    assert "no internet" in on_colab and REPOSITORY in on_colab
    assert "Kaggle" not in on_colab  # Kaggle's advice only there
    on_kaggle = _failure(tmp_path, github_out_of_reach, KAGGLE)
    assert "no internet" in on_kaggle
    assert "Settings > Internet" in on_kaggle and "phone-verified" in on_kaggle


@pytest.mark.parametrize("platform", [COLAB, KAGGLE])
def test_setup_cell_refuses_a_torch_older_than_the_floor(tmp_path, platform):
    """The platform's torch, older than pyproject.toml's floor: its installed metadata, standing
    first on the path, says 2.6.0. The cell says so before it fetches anything."""
    floor = tool.floors()["torch"]
    old = tmp_path / "old-torch"
    (old / "torch-2.6.0.dist-info").mkdir(parents=True)
    metadata = "Metadata-Version: 2.1\nName: torch\nVersion: 2.6.0\n"
    (old / "torch-2.6.0.dist-info" / "METADATA").write_text(metadata)
    last = _failure(tmp_path, (tmp_path / "never-reached").as_uri(), platform, str(old))
    assert "torch 2.6.0" in last and floor in last
    assert f"'torch>={floor}'" in last  # the fix: pip install a torch at the floor or newer
    assert not (tmp_path / "home").exists()  # nothing fetched


def test_the_cell_checks_the_floors_of_pyproject_toml():
    assert tool.floors() == {"torch": "2.8", "torchvision": "0.23"}  # README's floor too
    assert json.dumps(tool.floors()) in tool.setup_source()


def test_what_colab_installs_holds_every_helpers_module(tmp_path):
    """The wheel pip builds from the repository has every module of helpers (torchrun -m
    helpers.X)."""
    source = tmp_path / "source"  # a copy, so that the build leaves nothing in the checkout
    shutil.copytree(
        ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-index",
        "--no-build-isolation",
        "--quiet",
    ]
    pip += ["--disable-pip-version-check", "-w", str(tmp_path / "wheel"), str(source)]
    built = subprocess.run(pip, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob(f"{PROJECT['name'].replace('-', '_')}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packed = {name for name in archive.namelist() if name.endswith(".py")}
    modules = {p.relative_to(source).as_posix() for p in (source / "helpers").rglob("*.py")}
    assert modules <= packed, f"not in the wheel Colab installs: {sorted(modules - packed)}"


def test_tool_adds_and_refreshes_the_cells_keeps_the_others_and_refuses_other_files(
    tmp_path, capsys
):
    md = nbformat.v4.new_markdown_cell
    code = nbformat.v4.new_code_cell
    cells = [md("# Title", id="t-0"), md("## Setup", id="t-1")]
    cells += [
        code("import torch", id="t-2", metadata={"tags": ["keep-me"]}),
        code("x = 1", id="t-3"),
    ]
    path = tmp_path / "07_example.ipynb"
    colab_view = {"provenance": [], "toc_visible": True}  # what Colab keeps of its view
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"colab": colab_view}), path)
    assert tool.main(["--check", str(path)]) == 1 and str(path) in capsys.readouterr().out
    assert tool.main([str(path)]) == 0
    after = nbformat.read(path, as_version=4).cells
    assert [c.id for c in after] == [tool.BADGE_ID, "t-0", "t-1", tool.SETUP_ID, "t-2", "t-3"]
    assert after[4].metadata == {"tags": ["keep-me"]} and after[4].source == "import torch"
    assert colab_url("07_example.ipynb") in after[0].source
    assert after[3].metadata == {"cellView": "form", "jupyter": {"source_hidden": True}}
    metadata = nbformat.read(path, as_version=4).metadata
    assert metadata["accelerator"] == "GPU"  # Colab opens it on a GPU runtime
    assert metadata["colab"] == {**colab_view, "gpuType": "T4"}
    written = path.read_bytes()
    assert (
        tool.main([str(path)]) == 0 and path.read_bytes() == written
    )  # a second run writes nothing
    assert tool.main(["--check", str(path)]) == 0

    text_only = tmp_path / "00_text.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[md("# Only text", id="t-0")]), text_only)
    tool.main([str(text_only)])
    after = nbformat.read(text_only, as_version=4).cells
    assert [c.id for c in after] == [tool.BADGE_ID, "t-0", tool.SETUP_ID]
    with pytest.raises(SystemExit, match="not a notebook"):
        tool.main([str(tmp_path / "script.py")])
    with pytest.raises(SystemExit, match="no such file"):
        tool.main([str(tmp_path / "missing.ipynb")])

    # refreshed in place, not duplicated:
    old_badge = (
        "[![Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://x/old.ipynb)"
    )
    # a badge without its id, in the wrong place, and a setup cell of an earlier version
    cells = [md("# Title", id="t-0"), code("import torch", id="t-1"), md(old_badge, id="t-2")]
    cells.append(code("# Colab only: install the course's helpers (old)\nprint('old')", id="t-3"))
    path = tmp_path / "04_data_parallel.ipynb"  # one with a Kaggle link too
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    assert tool.main(["--check", str(path)]) == 1
    tool.main([str(path)])
    after = nbformat.read(path, as_version=4).cells
    assert [c.id for c in after] == [tool.BADGE_ID, "t-0", tool.SETUP_ID, "t-1"]
    assert after[2].source == tool.setup_source() and "old.ipynb" not in after[0].source
    assert kaggle_url("04_data_parallel.ipynb") in after[0].source


def test_tool_points_the_links_of_a_markdown_file_at_the_tag_and_changes_nothing_else(tmp_path):
    stale = (
        "https://colab.research.google.com/github/someone/old-name/blob/main/notebooks/00_a.ipynb"
    )
    kaggle = "https://www.kaggle.com/kernels/welcome?src=https://github.com/x/y/blob/v0.1/notebooks/04_b.ipynb"
    text = f"| `00_a` [Colab]({stale}) | text |\n\nOn [Kaggle]({kaggle}); [elsewhere](https://example.org).\n"
    path = tmp_path / "README.md"
    path.write_text(text)
    assert tool.main(["--check", str(path)]) == 1 and tool.main([str(path)]) == 0
    expected = text.replace(stale, colab_url("00_a.ipynb")).replace(
        kaggle, kaggle_url("04_b.ipynb")
    )
    assert path.read_text() == expected
    assert tool.main(["--check", str(path)]) == 0
