"""The README's commands, as a new user runs them, so the README cannot drift.

"Try it" runs verbatim on a fresh copy of the repository with a Python that refuses a bare
`pip install` (PEP 668), as Debian's and Ubuntu's system `python3` do: a copy of this
interpreter whose standard library carries an `EXTERNALLY-MANAGED` marker. Its
`pip install` resolves packages the way pip is configured on this machine (an index, or
`PIP_FIND_LINKS`/`PIP_NO_INDEX` for a wheel directory offline): the point is the user's
exact command, so the test adds no pip options of its own.
"""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.index.location import index_path
from tests.conftest import seed_index
from tests.fixture_vault import REPO_ROOT

README = REPO_ROOT / "README.md"


def readme_block(section: str) -> str:
    """The first ```bash block under the README heading `section`."""
    text = README.read_text("utf-8")
    found = re.search(rf"^## {re.escape(section)}.*?^```bash\n(.*?)^```", text, re.M | re.S)
    assert found, f"no bash block under '## {section}' in README.md"
    return found[1].strip()


def fresh_copy(target: Path) -> Path:
    """The repository as a clone would have it: tracked and new files, nothing ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def externally_managed_python(root: Path) -> Path:
    """A copy of this interpreter with its own prefix whose stdlib is marked EXTERNALLY-MANAGED.

    Python finds its prefix from where its executable is (the `os.py` landmark), so a copied
    executable beside a `lib/pythonX.Y` of links to the real standard library is a Python of
    its own. Its site-packages holds only pip, as a distribution's python3-pip would."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = root / "lib" / version
    stdlib.mkdir(parents=True)
    real_stdlib = Path(sysconfig.get_paths()["stdlib"])
    for entry in real_stdlib.iterdir():
        if entry.name != "site-packages":
            (stdlib / entry.name).symlink_to(entry)
    (stdlib / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=This Python is managed by the system; use a venv.\n"
    )
    (root / "bin").mkdir()
    executable = root / "bin" / "python3"
    base = getattr(sys, "_base_executable", sys.executable)
    shutil.copy2(os.path.realpath(base), executable)
    # Where this build looks for packages: lib/pythonX.Y/site-packages, or dist-packages
    # on Debian's own build.
    asked = subprocess.run(
        [executable, "-c", "import site; print('\\n'.join(site.getsitepackages()))"],
        capture_output=True,
        text=True,
        check=True,
    )
    site = next(Path(p) for p in asked.stdout.split() if Path(p).is_relative_to(root))
    site.mkdir(parents=True, exist_ok=True)
    import pip

    (site / "pip").symlink_to(Path(pip.__file__).parent)
    return executable


@pytest.mark.timeout(900)
def test_try_it_runs_verbatim_with_an_externally_managed_python(
    tmp_path: Path, fixture_index: Path
) -> None:
    clone = fresh_copy(tmp_path / "clone")
    # The fixture vault's passage index as the session built it: a new user's first call
    # waits while the model embeds the vault, which tests/test_cli.py and the session's
    # own build cover; this test is about the install and the README's exact words.
    seeded = index_path(
        seed_index(Settings(vault_path=clone / "fixtures" / "vault"), fixture_index)
    )
    indexes = set(seeded.parent.glob("*.sqlite3"))
    python = externally_managed_python(tmp_path / "system-python")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OBSIDIAN_", "PYTHON", "VIRTUAL_ENV", "CONDA"))
    }
    env["PATH"] = f"{python.parent}{os.pathsep}/usr/bin{os.pathsep}/bin"

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )

    where = run("command -v python3 && python3 -c 'import sys; print(sys.prefix)'")
    assert where.stdout.split() == [str(python), str(python.parent.parent)], where.stderr
    refused = run("python3 -m pip install --dry-run --no-deps .")
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr

    done = run(readme_block("Try it"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.startswith('"What did Mira promise at the lighthouse?" · ')
    assert "## Sessions/Session 04 - The Lighthouse at Greyhook.md" in done.stdout
    assert "That's a promise" in done.stdout
    assert not (clone / "fixtures" / "vault" / "obsidian-mcp").exists()
    assert set(seeded.parent.glob("*.sqlite3")) == indexes, "the command built an index of its own"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    command = readme_block("Run the tests")
    script = (REPO_ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert script[-1] == command
    # The commands use the venv by path: nothing to activate, nothing installed system-wide.
    for block in (command, readme_block("Try it")):
        assert block.startswith("python3 -m venv .venv && .venv/bin/pip install ")
        assert "python3 -m pip" not in block


def test_the_readme_names_every_setting() -> None:
    readme = README.read_text("utf-8")
    prefix = Settings.model_config.get("env_prefix", "")
    missing = [
        f"{prefix}{name.upper()}"
        for name in Settings.model_fields
        if f"`{prefix}{name.upper()}`" not in readme
    ]
    assert not missing, f"add to the README's configuration table: {missing}"
