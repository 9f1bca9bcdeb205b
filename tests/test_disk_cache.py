"""The on-disk cache: private directories, checksummed entries, damage and concurrent writers."""
import multiprocessing
import os
import pathlib
import stat
import warnings

import pytest

from tritonize.runtime import disk_cache


@pytest.fixture
def root(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TRITONIZE_CACHE_DIR", str(path))
    monkeypatch.delenv("TRITONIZE_CACHE", raising=False)
    disk_cache._checked_root.cache_clear()
    yield path
    disk_cache._checked_root.cache_clear()


def test_directories_are_created_private(root):
    entries = disk_cache.entry_dir("autotune")
    assert entries == root / "autotune"
    for path in (root, entries, disk_cache.module_dir()):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_entry_round_trip(root):
    path = disk_cache.entry_dir("graphs") / "a.entry"
    assert disk_cache.read_entry(path) is None
    assert disk_cache.write_entry(path, b"payload \x00\xff bytes")
    assert disk_cache.read_entry(path) == b"payload \x00\xff bytes"
    assert disk_cache.write_json(path, {"b": [1, 2], "a": "x"})
    assert disk_cache.read_json(path) == {"a": "x", "b": [1, 2]}


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "longer"])
def test_damaged_entry_is_a_miss_and_is_rewritten(root, damage, caplog):
    path = disk_cache.entry_dir("autotune") / "k.json"
    disk_cache.write_json(path, {"best": list(range(100))})
    data = path.read_bytes()
    damaged = {"truncate": data[:-7], "flip": data[:-3] + bytes([data[-3] ^ 1]) + data[-2:],
               "garbage": b"not a cache entry", "empty": b"", "longer": data + b"extra"}[damage]
    path.write_bytes(damaged)
    with caplog.at_level("DEBUG", logger="tritonize.cache"):
        assert disk_cache.read_json(path) is None
    assert "damaged entry" in caplog.text
    assert disk_cache.write_json(path, {"best": [1]})
    assert disk_cache.read_json(path) == {"best": [1]}


def test_caching_off(root, monkeypatch):
    monkeypatch.setenv("TRITONIZE_CACHE", "0")
    assert disk_cache.entry_dir("autotune") is None
    modules = disk_cache.module_dir()  # still needed: Triton reads kernels from files
    assert root not in modules.parents and stat.S_IMODE(os.stat(modules).st_mode) == 0o700


def test_directory_other_users_can_write_is_not_used(root):
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert disk_cache.entry_dir("graphs") is None
        modules = disk_cache.module_dir()
    assert any("can be written by other users" in str(w.message) for w in caught)
    assert root not in modules.parents


def test_directory_of_another_user_is_not_used(root, monkeypatch):
    root.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(root).st_uid + 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert disk_cache.entry_dir("graphs") is None
    assert any("belongs to user id" in str(w.message) for w in caught)


def test_symlinked_subdirectory_is_refused(root, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    root.mkdir(mode=0o700)
    (root / "autotune").symlink_to(elsewhere)
    assert disk_cache.entry_dir("autotune") is None


def _writer(path, marker, rounds):
    for i in range(rounds):
        disk_cache.write_entry(pathlib.Path(path), (marker * 20000) + str(i).encode())


def test_concurrent_writers_never_leave_a_mixed_entry(root):
    path = disk_cache.entry_dir("graphs") / "shared.entry"
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(path), m, 40)) for m in (b"a", b"b", b"c")]
    for w in writers:
        w.start()
    seen = set()
    while any(w.is_alive() for w in writers):
        payload = disk_cache.read_entry(path)
        if payload is not None:
            assert len(set(payload[:20000])) == 1 and payload[20000:].isdigit(), "mixed entry"
            seen.add(payload[:1])
    for w in writers:
        w.join()
        assert w.exitcode == 0
    final = disk_cache.read_entry(path)
    assert final is not None and final[20000:] == b"39"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_version_and_keys_are_stable():
    assert disk_cache.tritonize_version() == disk_cache.tritonize_version()
    assert len(disk_cache.tritonize_version()) == 16
    assert disk_cache.stable_hash({"b": 1, "a": 2}) == disk_cache.stable_hash({"a": 2, "b": 1})
    assert disk_cache.stable_hash("x", 1) != disk_cache.stable_hash("x", 2)
