"""Writes the manifest's JSON schema to the file checked into the repository (`python -m service.contract.export`)."""

from __future__ import annotations

import json
from pathlib import Path

from service.contract.manifest import FORMAT_VERSION, manifest_json_schema

SCHEMA_PATH = Path(__file__).with_name(f"manifest.v{FORMAT_VERSION}.schema.json")


def render_schema() -> str:
    return json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    SCHEMA_PATH.write_text(render_schema())
    print(f"wrote {SCHEMA_PATH}")


if __name__ == "__main__":
    main()
