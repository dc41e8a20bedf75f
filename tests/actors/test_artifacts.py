"""Build artifacts packed on one node and unpacked on another (`cudal1.actors.artifacts`), without
Ray: the SHA-256 is checked on arrival, unsafe members are refused, mtimes and modes survive."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import tarfile

import pytest

from cudal1.actors import artifacts
from cudal1.actors.artifacts import ArtifactError, pack, unpack
from cudal1.bench import buildcache


def a_build(root):
    """A build directory like torch's under `root`, with a build record beside it."""
    ext = root / "ext" / "torch-x" / "cpu-test" / "0123456789abcdef"
    (ext / "mod").mkdir(parents=True)
    (ext / "mod" / "main.cpp").write_text("int f() { return 1; }\n")
    so = ext / "mod" / "mod.so"
    so.write_bytes(b"\x7fELF not really")
    os.chmod(so, 0o775)
    os.utime(so, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    (ext / "prebuild.json").write_text('{"build_seconds": 1.5, "prebuild_s": 2.0}')
    buildcache.remember_built(ext, [{"path": os.path.realpath(so), "sha256": buildcache.file_sha256(so)}])
    return ext


def test_an_artifact_arrives_whole_under_another_root(tmp_path):
    built = a_build(tmp_path / "builder")
    os.symlink("/etc/passwd", built / "mod" / "link")  # not packed: only files and directories travel
    info, data = pack(tmp_path / "builder", built)
    assert info.key == "ext/torch-x/cpu-test/0123456789abcdef" and info.size == len(data)
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    dest = unpack(info, data, tmp_path / "timer")
    assert dest == tmp_path / "timer" / info.key
    so = dest / "mod" / "mod.so"
    assert so.read_bytes() == b"\x7fELF not really" and not (dest / "mod" / "link").exists()
    assert os.stat(so).st_mtime_ns == 1_700_000_000_123_456_789  # ninja decides on mtimes
    assert os.stat(so).st_mode & 0o777 == 0o775  # group write kept: the sandbox's group builds here
    assert buildcache.take_record(dest) == {"build_seconds": 1.5, "prebuild_s": 2.0}
    # The build records name the arrived files, not the builder's.
    assert buildcache.remembered_built(dest) == [{"path": os.path.realpath(so), "sha256": buildcache.file_sha256(so)}]
    assert artifacts.is_marked(dest, info.sha256) and not artifacts.is_marked(dest, "0" * 64)
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".")]  # no staging left


def test_a_hard_link_in_the_build_travels_as_a_file(tmp_path):
    """A hard link a build (the candidate) made in its directory is packed as a file of its own:
    `unpack` refuses link members, and a refused artifact is the harness's failure, a status no
    candidate may be able to cause."""
    built = a_build(tmp_path / "builder")
    os.link(built / "mod" / "main.cpp", built / "mod" / "again.cpp")
    info, data = pack(tmp_path / "builder", built)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert all(m.isreg() or m.isdir() for m in tar.getmembers())
    dest = unpack(info, data, tmp_path / "timer")
    for name in ("main.cpp", "again.cpp"):
        assert (dest / "mod" / name).read_text() == "int f() { return 1; }\n"
    assert os.stat(dest / "mod" / "again.cpp").st_ino != os.stat(dest / "mod" / "main.cpp").st_ino


def test_an_artifact_replaces_an_older_build_of_the_source(tmp_path):
    info, data = pack(tmp_path / "builder", a_build(tmp_path / "builder"))
    old = tmp_path / "timer" / info.key
    (old / "stale").mkdir(parents=True)
    unpack(info, data, tmp_path / "timer")
    assert not (old / "stale").exists() and (old / "mod" / "mod.so").is_file()


def test_a_changed_artifact_is_refused_before_anything_is_written(tmp_path):
    info, data = pack(tmp_path / "builder", a_build(tmp_path / "builder"))
    with pytest.raises(ArtifactError, match="SHA-256"):
        unpack(info, data[:-1] + bytes([data[-1] ^ 1]), tmp_path / "timer")
    with pytest.raises(ArtifactError, match="not a relative path"):
        unpack(dataclasses.replace(info, key="ext/../../etc"), data, tmp_path / "timer")
    assert not (tmp_path / "timer").exists()


def tar_of(*members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member, content in members:
            tar.addfile(member, io.BytesIO(content) if content is not None else None)
    data = buffer.getvalue()
    return artifacts.ArtifactInfo("ext/t/a/h", hashlib.sha256(data).hexdigest(), len(data), "/nowhere"), data


def regular(name, content=b"x"):
    member = tarfile.TarInfo(name)
    member.size = len(content)
    return member, content


def link(name, target, kind):
    member = tarfile.TarInfo(name)
    member.type, member.linkname = kind, target
    return member, None


@pytest.mark.parametrize(
    "member",
    [
        regular("/etc/cron.d/x"),
        regular("build/../../escape"),
        regular("elsewhere"),
        link("build/l", "/etc/passwd", tarfile.SYMTYPE),
        link("build/h", "build/x", tarfile.LNKTYPE),
    ],
    ids=["absolute", "dotdot", "outside-build", "symlink", "hardlink"],
)
def test_unsafe_members_are_refused(tmp_path, member):
    info, data = tar_of(regular("build/ok"), member)
    with pytest.raises(ArtifactError, match="artifact member"):
        unpack(info, data, tmp_path)
    assert not (tmp_path / "ext").exists()


def test_a_device_is_refused(tmp_path):
    device = tarfile.TarInfo("build/null")
    device.type = tarfile.CHRTYPE
    info, data = tar_of((device, None))
    with pytest.raises(ArtifactError, match="not a regular file"):
        unpack(info, data, tmp_path)


def test_a_build_outside_the_cache_root_is_not_packed(tmp_path):
    with pytest.raises(ArtifactError, match="not under the cache root"):
        pack(tmp_path / "root", a_build(tmp_path / "other"))


def test_a_receiver_that_sees_the_build_already_fetches_nothing(tmp_path):
    """One host (or shared storage): the builder marked its directory, so the timing side takes the
    build where it is; elsewhere the bytes are fetched once, then the marker says they arrived."""
    built = a_build(tmp_path / "builder")
    info, data = pack(tmp_path / "builder", built)
    artifacts.mark(built, info.sha256)

    def never() -> bytes:
        raise AssertionError("fetched a build this node already sees")

    assert artifacts.receive(info, never, tmp_path / "builder") is False
    fetched = []
    assert artifacts.receive(info, lambda: fetched.append(1) or data, tmp_path / "timer") is True
    assert artifacts.receive(info, never, tmp_path / "timer") is False
    assert fetched == [1] and (tmp_path / "timer" / info.key / "mod" / "mod.so").is_file()
