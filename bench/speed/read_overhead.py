"""How much a vault_read_note call through MCP costs over the raw REST request it makes.

    python -m bench.speed.read_overhead [--rounds 200] [--plugin-version 5.1.0]

Starts the stand-in over a copy of fixtures/vault, then alternates, round by round, a raw
authenticated httpx GET of a note and `vault_read_note` of the same note through the SDK's
in-process `Client`, so both see the same machine noise. Prints both medians and their
ratio (target: at most 2). A benchmark, not a test: nothing here asserts.
"""

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.rest import encode_path
from tests.standin.process import StandinProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTE = "Characters/Companion/Mira Vessant.md"


async def measure(process: StandinProcess, config_dir: Path, rounds: int) -> tuple[float, float]:
    settings = Settings.model_validate(
        {
            "api_key": process.api_key,
            "port": process.port,
            "cert": process.cert,
            "config_dir": config_dir,
        }
    )
    raw_times: list[float] = []
    tool_times: list[float] = []
    url = "/vault/" + encode_path(NOTE)
    async with process.async_client() as http, Client(build_server(settings)) as client:
        for round_number in range(rounds + 5):
            started = time.perf_counter()
            response = await http.get(url)
            raw = time.perf_counter() - started
            response.raise_for_status()
            started = time.perf_counter()
            result = await client.call_tool("vault_read_note", {"path": NOTE})
            tool = time.perf_counter() - started
            if result.is_error:
                raise SystemExit(f"vault_read_note failed: {result.content}")
            if round_number >= 5:  # the first rounds warm connections and caches
                raw_times.append(raw)
                tool_times.append(tool)
    return statistics.median(raw_times), statistics.median(tool_times)


def main() -> None:
    parser = argparse.ArgumentParser(description="vault_read_note over MCP vs a raw GET")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--plugin-version", default="5.1.0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        vault = Path(scratch) / "vault"
        shutil.copytree(REPO_ROOT / "fixtures" / "vault", vault)
        with StandinProcess(vault, plugin_version=args.plugin_version) as process:
            raw, tool = anyio.run(measure, process, Path(scratch) / "config", args.rounds)
    print(f"plugin {args.plugin_version}, {args.rounds} rounds, note {NOTE!r}")
    print(f"raw httpx GET median:            {raw * 1000:7.2f} ms")
    print(f"vault_read_note via MCP median:  {tool * 1000:7.2f} ms")
    print(f"ratio: {tool / raw:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
