"""Editing a Run file as a person would: only the edited value changes, whatever the file's layout."""

from __future__ import annotations

import pytest

from reconciler.spec import runfile

BLOCK = b"""# my run
apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata:
  name: j2
  namespace: team-b
spec:
  owner: "org:team-b"     # aligned comment
  resources:
    gpuType: H100-80GB
    totalGPUs: 24
  malleable:
    minTotalGPUs: 8
    maxTotalGPUs: 24
    stepGPUs: 8
    desiredTotalGPUs: 24    # what I want
  template:
    command: ["torchrun", 'train.py']
"""

# indentation ruamel would lay out anew (4 then 2, sequences indented differently), a document
# start and end marker, a quoted value: the value is put into the original bytes instead
ODD = b"""---
apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata: {name: odd, namespace: team-b}
spec:
    owner:    'org:team-b'
    resources:
      gpuType: H100-80GB
      totalGPUs: 24
    malleable: {minTotalGPUs: 8, maxTotalGPUs: 24, stepGPUs: 8}
    template:
        env:
        -   name: A
            value: '1'
...
"""


def diff(before: bytes, after: bytes) -> list[tuple[str, str]]:
    a, b = before.decode().splitlines(), after.decode().splitlines()
    assert len(a) in (len(b), len(b) - 1)
    return [(x, y) for x, y in zip(a, b, strict=False) if x != y]


def test_setting_the_desired_width_changes_that_value_and_nothing_else() -> None:
    after = runfile.with_desired(BLOCK, 16)
    assert after == BLOCK.replace(b"desiredTotalGPUs: 24    #", b"desiredTotalGPUs: 16    #")


def test_a_missing_desired_width_is_added_beside_its_siblings() -> None:
    block = BLOCK.replace(b"    desiredTotalGPUs: 24    # what I want\n", b"")
    after = runfile.with_desired(block, 16)
    assert after == block.replace(b"    stepGPUs: 8\n", b"    stepGPUs: 8\n    desiredTotalGPUs: 16\n")
    flow = runfile.with_desired(ODD, 16)
    assert flow == ODD.replace(b"stepGPUs: 8}", b"stepGPUs: 8, desiredTotalGPUs: 16}")


def test_a_layout_ruamel_would_change_is_kept_byte_for_byte() -> None:
    quoted = ODD.replace(b"stepGPUs: 8}", b'stepGPUs: 8, desiredTotalGPUs: "24"}')
    after = runfile.with_desired(quoted, 8)
    assert after == quoted.replace(b'desiredTotalGPUs: "24"', b"desiredTotalGPUs: 8")
    assert runfile.desired_of(after) == 8


def test_windows_line_endings_stay() -> None:
    crlf = BLOCK.replace(b"\n", b"\r\n")
    assert runfile.with_desired(crlf, 8) == crlf.replace(b"desiredTotalGPUs: 24 ", b"desiredTotalGPUs: 8 ")


def test_a_fixed_width_run_cannot_be_resized() -> None:
    fixed = b"apiVersion: v\nkind: Run\nmetadata: {name: x}\nspec:\n  resources: {totalGPUs: 8}\n"
    with pytest.raises(runfile.EditRefused, match="fixed"):
        runfile.with_desired(fixed, 16)


def test_a_submitted_file_names_its_run_and_a_missing_namespace_is_added_after_the_name() -> None:
    sub = runfile.submitted(BLOCK.replace(b"  namespace: team-b\n", b""))
    assert (sub.kind, sub.name, sub.namespace, sub.converted) == ("Run", "j2", None, False)
    assert runfile.with_namespace(sub.text, "team-b") == BLOCK
    flow = runfile.with_namespace(ODD.replace(b", namespace: team-b", b""), "team-b")
    assert flow == ODD


def test_json_is_turned_into_block_yaml_in_the_files_key_order() -> None:
    sub = runfile.submitted(
        b'{"kind": "Run", "apiVersion": "v", "metadata": {"name": "x", "namespace": "n"}}'
    )
    assert sub.converted and sub.text == b"kind: Run\napiVersion: v\nmetadata:\n  name: x\n  namespace: n\n"


@pytest.mark.parametrize(
    "text",
    [b"kind: Run\nmetadata: [\n", b"- a\n- b\n", b"a: 1\n---\nb: 2\n", b"\xff\xfe"],
    ids=["broken", "a list", "two documents", "not UTF-8"],
)
def test_what_is_not_one_object_is_unreadable(text: bytes) -> None:
    with pytest.raises(runfile.Unreadable):
        runfile.submitted(text)
