"""Every path-traversal form is refused before any I/O, by the vault and by both sources."""

from pathlib import Path

import pytest

from obsidian_mcp.errors import PathRefused
from obsidian_mcp.paths import normalize_vault_path
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault

TRAVERSALS = [
    "../outside.md",
    "Characters/../../outside.md",
    "..",
    "%2e%2e/outside.md",
    "%2E%2E%2Foutside.md",
    "Characters/%2e%2e/%2e%2e/outside.md",
    "%252e%252e/outside.md",
    "..\\outside.md",
    "Characters\\..\\..\\outside.md",
    "/etc/passwd",
    "\\etc\\passwd",
    "C:\\Windows\\win.ini",
    "c:/windows/win.ini",
    "Characters/Mira\x00.md",
    "Characters/Mira%00.md",
]


@pytest.mark.parametrize("raw", TRAVERSALS)
def test_traversal_forms_are_refused(raw: str) -> None:
    with pytest.raises(PathRefused) as refused:
        normalize_vault_path(raw)
    assert "relative to the vault root" in str(refused.value)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Characters/Mira.md", "Characters/Mira.md"),
        ("./Characters//Mira.md", "Characters/Mira.md"),
        ("Characters\\Mira.md", "Characters/Mira.md"),
        ("  Old Tomas (the ferryman).md ", "Old Tomas (the ferryman).md"),
        ("100% done.md", "100% done.md"),
        ("Æsa Þórdóttir.md", "Æsa Þórdóttir.md"),
        ("a..b.md", "a..b.md"),
    ],
)
def test_ordinary_paths_are_cleaned_not_refused(raw: str, clean: str) -> None:
    assert normalize_vault_path(raw) == clean


def test_folder_root_only_where_a_folder_is_expected() -> None:
    assert normalize_vault_path("", folder=True) == ""
    assert normalize_vault_path("/", folder=True) == ""
    assert normalize_vault_path("Lore/", folder=True) == "Lore"
    with pytest.raises(PathRefused):
        normalize_vault_path("")


@pytest.mark.anyio
async def test_symlink_leaving_the_vault_is_not_followed(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("top secret")
    (vault_dir / "escape.md").symlink_to(secret)
    (vault_dir / "linked").symlink_to(tmp_path)
    vault = Vault(None, FolderSource(vault_dir))
    for path in ("escape.md", "linked/secret.md"):
        with pytest.raises(PathRefused, match="outside the vault"):
            await vault.read_note(path)
        with pytest.raises(PathRefused):
            await vault.append(path, "x")
    assert secret.read_text() == "top secret"


@pytest.mark.anyio
@pytest.mark.parametrize("raw", TRAVERSALS)
async def test_vault_refuses_before_touching_the_folder(tmp_path: Path, raw: str) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("must stay")
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    vault = Vault(None, FolderSource(vault_dir))
    for operation in (vault.read_note(raw), vault.write(raw, "x"), vault.append(raw, "x")):
        with pytest.raises(PathRefused):
            await operation
    assert outside.read_text() == "must stay"
    assert list(vault_dir.iterdir()) == []
