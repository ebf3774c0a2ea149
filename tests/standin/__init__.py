"""A stand-in for Obsidian's "Local REST API" plugin (3.x to 5.x), for tests and benchmarks.

It is a real HTTPS server process over a vault folder (``python -m tests.standin``),
faithful to the contract in ``shared/reference/local-rest-api.md`` and branching on
``--plugin-version``; ``tests.standin.process.StandinProcess`` starts and stops it.
Fault switches (latency, failures, hangs, dropped connections) can be set on the command
line or at run time through ``POST /__standin__/faults``.

Modules: ``server`` (routes, auth, envelopes, faults, ``/active/``), ``vault`` (files,
metadata, links, simple search), ``markdown`` (frontmatter/tags/links parsing),
``patch`` (``PATCH /vault/{path}`` per version: markdown-patch 0.2-1.1 and 2.0),
``mdblocks`` (marked's top-level block lexer, v14 and v17), ``yamljs`` (frontmatter as
the ``yaml`` npm package loads and stringifies it), ``jsonlogic``, ``smart``
(``/search/smart`` over ``.smart-env``), ``certs``, ``versions``, ``jsstring``.
"""
