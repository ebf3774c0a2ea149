"""Attachments (issue 26, item 4): a PDF is read as its extracted text, through the vault
folder and the stand-in Local REST API alike; an image, audio or other binary file is
refused as an attachment with what it is and how notes use it, never shown as bytes."""

import zlib
from pathlib import Path

import pytest
from mcp import Client

from obsidian_mcp.server import build_server
from tests.conftest import folder_settings, rest_settings
from tests.standin.process import StandinProcess
from tests.test_read_tools import answers


def pdf_with(pages: list[str], *, binary: bool = True) -> bytes:
    """A PDF of these pages of text, each page's content stream compressed (as real PDFs
    are, so the file holds bytes no text file holds), with a binary comment line."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + 2 * n} 0 R" for n in range(len(pages)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for n, text in enumerate(pages):
        stream = zlib.compress(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1"))
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * n} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(
            f"<< /Length {len(stream)} /Filter /FlateDecode >>\nstream\n".encode()
            + stream
            + b"\nendstream"
        )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n" + (b"%\x00\xe2\xe3\xcf\xd3\n" if binary else b""))
    offsets: list[int] = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n"
    out += trailer.encode() + b"%%EOF\n"
    return bytes(out)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "Attachments").mkdir(parents=True)
    (root / "Attachments" / "rules.pdf").write_bytes(
        pdf_with(["Tide tables of Vellmouth", "The ferry leaves at the ninth bell"])
    )
    (root / "Attachments" / "plain.pdf").write_bytes(
        pdf_with(["A PDF with no binary byte"], binary=False)
    )
    (root / "Attachments" / "damaged.pdf").write_bytes(b"%PDF-1.4\n%\x00\x01 not a pdf at all")
    (root / "Attachments" / "map.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "Attachments" / "song.mp3").write_bytes(b"ID3\x04\x00\x00\x00\x00\x00\x00")
    (root / "Harbour.md").write_text("# Harbour\n\n![[map.png]] and ![[rules.pdf]]\n")
    return root


CALLS: list[tuple[str, dict[str, object]]] = [
    ("vault_read_note", {"path": "Attachments/rules.pdf"}),
    ("vault_read_note", {"path": "Attachments/rules.pdf", "offset": 30, "max_chars": 200}),
    ("vault_read_note", {"path": "Attachments/plain.pdf"}),
    ("vault_peek_file", {"path": "Attachments/rules.pdf"}),
    ("vault_read_note", {"path": "Attachments/rules.pdf", "heading": "Tides"}),
    ("vault_read_note", {"path": "Attachments/damaged.pdf"}),
    ("vault_read_note", {"path": "Attachments/map.png"}),
    ("vault_peek_file", {"path": "Attachments/song.mp3"}),
    ("vault_read_note", {"path": "Attachments/missing.png"}),
]


@pytest.mark.anyio
async def test_a_pdf_is_read_as_its_text_and_other_attachments_are_named(
    vault: Path, tmp_path: Path
) -> None:
    async with Client(build_server(folder_settings(vault, tmp_path / "config"))) as client:
        (
            whole, window, plain, outline, heading, damaged, image, audio, missing
        ) = await answers(client, CALLS)
    assert not whole[0]
    assert whole[1].splitlines()[1] == (
        "chars 0-91 of 91 · text extracted from a PDF of 2 pages (not its layout)"
    )
    assert "--- page 1 ---\nTide tables of Vellmouth" in whole[1]
    assert "--- page 2 ---\nThe ferry leaves at the ninth bell" in whole[1]
    assert "%PDF" not in whole[1] and "version" not in whole[1]
    assert not window[0] and "chars 30-91 of 91" in window[1]
    assert not plain[0] and "A PDF with no binary byte" in plain[1]
    assert not outline[0]
    assert "gist (summary): Tide tables of Vellmouth" in outline[1]
    assert 'next: vault_read_note(path="Attachments/rules.pdf") reads its text' in outline[1]
    assert heading[0] and "is a PDF: it has pages, not headings" in heading[1]
    assert damaged[0] and "could not be read as a PDF" in damaged[1]
    assert image[0] and "is an attachment (an image), not a note" in image[1]
    assert "![[map.png]]" in image[1] and 'vault_smart_search(query="map.png")' in image[1]
    assert audio[0] and "is an attachment (an audio file)" in audio[1]
    assert missing[0] and "No note at 'Attachments/missing.png'" in missing[1]


@pytest.mark.anyio
async def test_the_stand_in_gives_the_same_replies(
    vault: Path, tmp_path: Path
) -> None:
    async with Client(build_server(folder_settings(vault, tmp_path / "config"))) as client:
        from_folder = await answers(client, CALLS)
    with StandinProcess(vault, plugin_version="5.1.0") as standin:
        async with Client(build_server(rest_settings(standin, tmp_path / "rest"))) as client:
            from_rest = await answers(client, CALLS)
    assert from_rest == from_folder
