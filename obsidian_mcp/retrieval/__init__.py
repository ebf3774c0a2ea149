# pyright: strict
"""Retrieval: keyword and semantic search over the vault, fused into budgeted passages.

Plain domain code (no MCP): the server's search tools call `Retriever` and format what it
returns with `render`.
"""
