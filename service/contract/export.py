"""Writes the manifest's JSON schema to the file checked into the repository (`python -m service.contract.export`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from service.contract.manifest import FORMAT_VERSION, manifest_json_schema

SCHEMA_PATH = Path(__file__).with_name(f"manifest.v{FORMAT_VERSION}.schema.json")


def render_schema() -> str:
    return json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        if not SCHEMA_PATH.exists() or SCHEMA_PATH.read_text() != render_schema():
            print(f"{SCHEMA_PATH} is stale: run `python -m service.contract.export`", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.write_text(render_schema())
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
