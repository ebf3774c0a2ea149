"""Plugin-version feature switches for the stand-in.

Each flag names one contract change from the version timeline in
``shared/reference/local-rest-api.md`` §0.1, plus a few the upstream source showed
(``3.6.0`` made the listing slash optional, ``4.0.3`` stopped reading note content for
JsonLogic queries that never mention ``"content"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def parse_version(text: str) -> tuple[int, int, int]:
    """``"5.1.0"`` → ``(5, 1, 0)``; missing or non-numeric parts count as 0."""
    parts = [int(m.group()) if (m := re.match(r"\d+", p)) else 0 for p in text.split(".")]
    parts += [0, 0, 0]
    return parts[0], parts[1], parts[2]


@dataclass(frozen=True)
class Features:
    """What the emulated plugin version does; built by :meth:`for_version`."""

    version: str
    #: 3.3.0: simple search matches the filename, adds ``match.source``, defaults
    #: ``contextLength`` to 100, answers 40090 without ``query``, splits 40012 from 40011.
    search_fixes: bool
    #: 3.5.0: ``GET /tags/``.
    tags_route: bool
    #: 3.6.0: ``GET /vault/dir`` lists without the trailing slash; URL section targeting.
    slash_optional_listing: bool
    #: 3.6.1: ``GET /vault/`` on an empty vault answers ``{"files": []}``, not 404.
    empty_root_listing: bool
    #: 4.0.0: ``links``/``backlinks`` in note JSON, simple search sorted descending,
    #: extension manifests carry ``routes``/``mcpTools``.
    links: bool
    #: 4.0.3: handler exceptions answer 500 (before: the request hangs); JsonLogic
    #: skips note content unless the query mentions ``"content"``.
    errors_answer_500: bool
    #: 4.1.3: path traversal answers 400/40021.
    traversal_guard: bool
    #: 5.0.0: ``unresolvedLinks``, per-segment path decoding, DELETE to ``.trash/``.
    v5: bool
    #: 6.0.0: ``GET /`` reports ``linkIndexReady``; a note's ``links``, ``backlinks`` and
    #: ``unresolvedLinks`` are null until it is true; header-based PATCH is gone.
    v6: bool
    #: Manifest ``name`` and the section named in the 401 message.
    manifest_name: str
    auth_section: str

    @classmethod
    def for_version(cls, version: str) -> Features:
        v = parse_version(version)
        if v >= (4, 1, 1):
            name = "Local REST API with MCP"
        elif v >= (4, 0, 0):
            name = "Local REST API & MCP Server"
        else:
            name = "Local REST API"
        return cls(
            version=version,
            search_fixes=v >= (3, 3, 0),
            tags_route=v >= (3, 5, 0),
            slash_optional_listing=v >= (3, 6, 0),
            empty_root_listing=v >= (3, 6, 1),
            links=v >= (4, 0, 0),
            errors_answer_500=v >= (4, 0, 3),
            traversal_guard=v >= (4, 1, 3),
            v5=v >= (5, 0, 0),
            v6=v >= (6, 0, 0),
            manifest_name=name,
            auth_section="Local REST API with MCP" if v >= (4, 1, 1) else "Local REST API",
        )

    def manifest(self) -> dict[str, object]:
        """The plugin's ``manifest.json`` as ``GET /`` reports it."""
        v = parse_version(self.version)
        modern = v >= (4, 0, 0)
        if v >= (5, 0, 0):
            min_app = "1.13.1"
        elif v >= (4, 1, 0):
            min_app = "1.4.0"
        else:
            min_app = "0.12.0"
        return {
            "id": "obsidian-local-rest-api",
            "name": self.manifest_name,
            "version": self.version,
            "minAppVersion": min_app,
            "description": (
                "A secure REST API and Model Context Protocol (MCP) server for your vault."
                if modern
                else "Get, change or otherwise interact with your notes in Obsidian via a REST API."
            ),
            "author": "Adam Coddington",
            "authorUrl": "https://adamcoddington.net/" if modern else "https://coddingtonbear.net/",
            "isDesktopOnly": True,
        }
