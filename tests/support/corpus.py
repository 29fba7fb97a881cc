"""The shared manifest corpus (tests/corpus): expectations, kind documents, fleets and a faithful schema validator.

Feeds the model, schema, rules and CLI tests; asserts nothing itself.
"""

from __future__ import annotations

import functools
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators
from pydantic import BaseModel

from schemas import diagnostics as codes
from schemas import publish
from schemas.fleet import Inventory
from schemas.load import KINDS
from tests.support import TESTS

CORPUS = TESTS / "corpus"
VALID = CORPUS / "valid"
INVALID = CORPUS / "invalid"
FLEETS = CORPUS / "fleets"
EXPECT = re.compile(r"^# expect: ([A-Z_]+|JT[0-9]{3}) at line (\d+)\s*$", re.M)


@dataclass(frozen=True, slots=True)
class Expected:
    path: str
    code: str  # the JTnnn code
    line: int


def expectations(text: str, path: str) -> set[Expected]:
    """`# expect: CODE at line N` comments (CODE is a name from schemas.diagnostics, or JTnnn itself)."""
    return {
        Expected(path, code if code.startswith("JT") else getattr(codes, code), int(line))
        for code, line in EXPECT.findall(text)
    }


def sentence(path: Path) -> str:
    """A file name as a test id that reads like a sentence."""
    return path.stem.replace("-", " ")


def kind_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.yaml"))


def model_for(path: Path, data: Any) -> type[BaseModel] | None:
    """Inventory files are named inventory-*; every other document names its kind."""
    if path.name.startswith("inventory-"):
        return Inventory
    kind = data.get("kind") if isinstance(data, dict) else None
    return KINDS.get(kind) if isinstance(kind, str) else None


def documents(path: Path) -> list[Any]:
    return list(yaml.safe_load_all(path.read_text()))


def materialize(name: str, into: Path) -> Path:
    """Copy fleet `name` into a folder; the seeds fleet also gets every seed manifest from valid/."""
    root = into / name
    shutil.copytree(FLEETS / name, root)
    if name == "seeds":
        for seed in sorted(VALID.glob("seed-*.yaml")):
            data = yaml.safe_load(seed.read_text())
            meta = data["metadata"]
            rel = (
                f"budgets/{meta['name']}.yaml"
                if data["kind"] == "Budget"
                else f"runs/{meta['namespace']}/{meta['name']}.yaml"
            )
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(seed.read_bytes())
    return root


def fleet_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def fleet_expectations(root: Path) -> set[Expected]:
    out: set[Expected] = set()
    for rel, data in fleet_files(root).items():
        if rel.endswith(".yaml"):
            out |= expectations(data.decode(), rel)
    extra = root / "EXPECT"  # expectations about files that are absent (a missing jobtree.yaml)
    if extra.exists():
        for line in extra.read_text().splitlines():
            path, _, rest = line.partition(": ")
            out |= expectations(f"# expect: {rest}", path)
    return out


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """ECMA-262 `$` matches only at the end (Python's `$` also before a final newline): the
    published patterns are ECMA regexes, so check them with ECMA's meaning."""
    if validator.is_type(instance, "string"):
        python = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
        if not re.search(python, instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _rfc3339(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


_FORMATS = FormatChecker(formats=())
_FORMATS.checks("date-time")(_rfc3339)
_Validator = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern})


def schema_validator(model: type[BaseModel]) -> Any:
    """The published schema of a model's kind, asserting formats (date-time) as the models do."""
    return kind_validator(
        "Inventory" if model is Inventory else next(k for k, m in KINDS.items() if m is model)
    )


@functools.cache
def kind_validator(kind: str) -> Any:
    """The published schema of `kind` (a `schemas.publish.SCHEMAS` name), asserting formats as the models do."""
    schema = publish.json_schema(kind)
    Draft202012Validator.check_schema(schema)
    return _Validator(schema, format_checker=_FORMATS)
