"""Content hashes kept between passes (`reconciler.cluster.hashes`): the same hashes as computed, never another object's."""

from __future__ import annotations

import copy
import marshal
from typing import Any

from reconciler.cluster import hashes, stamp

Obj = dict[str, Any]


def pod(name: str, gpus: Any = 8, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "t", "labels": {"rq.davidlangworthy.io/run": "r"}},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "workload", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            **spec,
        },
    }  # fmt: skip


def run_mirror(name: str, share: Any) -> Obj:
    return {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "Run",
        "metadata": {"name": name, "namespace": "t"},
        "spec": {"gpus": 64, "share": share, "note": "Zürich"},
        "status": {"phase": "Running"},
    }


OBJECTS = [pod("p0"), pod("p1", gpus=4, priority=0.5), run_mirror("r0", 0.25), run_mirror("r1", None)]


def stamped(objects: list[Obj], known: hashes.Known | None) -> list[tuple[Obj, Obj | None]]:
    return [stamp.stamped(o, "acme", known) for o in objects]


class Counted:
    """`stamp.content_hashes`, counting the objects it digests (the check's sample aside)."""

    def __init__(self) -> None:
        self.digested = 0

    def __call__(self, body: Obj, is_pod: bool) -> hashes.Hashes:
        if body is not hashes.SAMPLE:
            self.digested += 1
        return stamp.content_hashes(body, is_pod)


def through_disk(known: hashes.Known) -> Any:
    """What the next pass reads back (`diskcache` keeps marshal data)."""
    return marshal.loads(marshal.dumps(known.held()))


def test_a_pass_after_one_that_stamped_the_same_objects_digests_none_and_stamps_the_same_bytes() -> None:
    plain = stamped(OBJECTS, None)
    first = stamp.known_hashes()
    assert stamped(OBJECTS, first) == plain
    count = Counted()
    second = hashes.Known(through_disk(first), count)
    assert stamped(OBJECTS, second) == plain
    assert count.digested == 0 and not second.changed
    # the annotations are written in the same order as without the memo (the bytes sent are the same)
    assert [list(b["metadata"]["annotations"]) for b, _ in stamped(OBJECTS, second)] == [
        list(b["metadata"]["annotations"]) for b, _ in plain
    ]


def test_a_changed_object_is_digested_again_and_only_what_the_pass_used_is_kept() -> None:
    first = stamp.known_hashes()
    stamped(OBJECTS, first)
    changed = [pod("p0", gpus=4), *OBJECTS[1:]]
    count = Counted()
    second = hashes.Known(through_disk(first), count)
    assert stamped(changed, second) == stamped(changed, None)
    assert count.digested == 1 and second.changed
    assert len(second.held()["hashes"]) == len(OBJECTS)  # p0's old entry is not kept


def test_objects_that_differ_only_in_a_values_type_never_share_an_entry() -> None:
    # 1, 1.0, True and "1" are equal or alike in Python or YAML, and digest differently
    variants = [run_mirror("r", share) for share in (1, 1.0, True, "1", [1], None)]
    variants += [pod("p", gpus=g) for g in (8, "8", 8.0)]
    known = stamp.known_hashes()
    assert stamped(variants, known) == stamped(variants, None)
    again = stamp.known_hashes(through_disk(known))
    assert stamped(variants, again) == stamped(variants, None)
    # JSON 1, 1.0, true, "1", [1], null: six mirrors; a pod's quantity is sent as text, so 8 and
    # "8" are the same pod ("8") and 8.0 another ("8.0")
    assert len({stamp.annotation(b, stamp.CONTENT_HASH) for b, _ in stamped(variants, again)}) == 8


def _prepared(obj: Obj) -> tuple[Obj, bool]:
    """`obj` as stamping leaves it just before its hashes."""
    body, _ = stamp.stamped(obj, "acme")
    body = copy.deepcopy(body)
    notes = body["metadata"]["annotations"]
    notes.pop(stamp.CONTENT_HASH)
    return body, notes.pop(stamp.SPEC_HASH, None) is not None


def test_a_memo_another_version_of_the_hashing_wrote_is_not_read() -> None:
    body, is_pod = _prepared(OBJECTS[0])
    wrong = ("0" * 20, "1" * 20)
    stale = {"check": ("a" * 20, "b" * 20), "hashes": {hashes.key_of(body, is_pod): wrong}}
    count = Counted()
    known = hashes.Known(stale, count)
    assert stamped(OBJECTS[:1], known) == stamped(OBJECTS[:1], None)
    assert count.digested == 1
    # the same entry under this code's check is taken as it is: the check is what guards it
    trusted = hashes.Known({**stale, "check": known.check}, count)
    assert trusted.hashes(body, is_pod) == wrong
    # anything else than a memo is no memo
    for data in (None, [], {"check": known.check}, {"check": known.check, "hashes": []}, b"x"):
        assert hashes.Known(data, count).known == {}


def test_a_value_marshal_cannot_write_is_digested_as_it_is() -> None:
    class Text(str):
        pass

    obj = run_mirror("r", Text("0.5"))
    known = stamp.known_hashes()
    assert stamped([obj], known) == stamped([obj], None)
    assert known.held()["hashes"] == {}
