"""Moving files: `read_file` / `write_file` (binary-safe, chunked, bounded
memory, inside the project), through the installed client and the real
binary."""

from __future__ import annotations

import hashlib
import io
import os
import resource

import envhost
from envhost import _protocol
from support import ProjectTest

EVERY_BYTE = bytes(range(256)) * 3 + b"\r\n\x00"


class Files(ProjectTest):
    def test_bytes_round_trip_exactly(self):
        session = self.session()
        written = session.write_file("data/every-byte.bin", EVERY_BYTE)
        self.assertEqual(written.size, len(EVERY_BYTE))
        self.assertTrue(written.complete)
        self.assertEqual((self.project / "data" / "every-byte.bin").read_bytes(), EVERY_BYTE)
        self.assertEqual(session.read_file("data/every-byte.bin"), EVERY_BYTE)
        # Absolute paths inside the project are the same files.
        self.assertEqual(session.read_file(self.project.resolve() / "data" / "every-byte.bin"), EVERY_BYTE)
        session.write_file("empty", b"")
        self.assertEqual(session.read_file("empty"), b"")

    def test_chunks_and_offsets(self):
        session = self.session()
        session.write_file("numbers", bytes(range(100)))
        chunk = session.read_file_chunk("numbers", offset=10, length=5)
        self.assertEqual((chunk.content, chunk.offset, chunk.size, chunk.eof), (bytes(range(10, 15)), 10, 100, False))
        tail = session.read_file_chunk("numbers", offset=95)
        self.assertEqual((tail.content, tail.eof), (bytes(range(95, 100)), True))

    def test_fifty_mebibytes_in_bounded_memory(self):
        session = self.session()
        size = 50 * 1024 * 1024
        source = self.project / "source.bin"
        with open(source, "wb") as file:
            for block in range(size // (1 << 20)):
                file.write(hashlib.sha256(str(block).encode()).digest() * (1 << 15))
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with open(source, "rb") as file:
            written = session.write_file("copy/target.bin", file)
        self.assertEqual(written.size, size)
        self.assertEqual(hashlib.sha256((self.project / "copy" / "target.bin").read_bytes()).hexdigest(), digest)
        sink = io.BytesIO()
        self.assertEqual(session.read_file("copy/target.bin", into=sink), size)
        self.assertEqual(hashlib.sha256(sink.getvalue()).hexdigest(), digest)
        # The client never held more than a few chunks at once besides the
        # 50 MiB sink (ru_maxrss is in KiB).
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        self.assertLess(grown * 1024, size + 8 * _protocol.FILE_CHUNK_BYTES)

    def test_a_chunked_write_appears_all_at_once(self):
        session = self.session()
        (self.project / "config").write_text("old\n")
        first = session._call(_protocol.write_file, "config", b"new ", append=False, more=True)
        self.assertEqual(first["size"], 4)
        self.assertFalse(first["complete"])
        self.assertEqual((self.project / "config").read_text(), "old\n")
        last = session._call(_protocol.write_file, "config", b"content\n", append=True, more=False)
        self.assertTrue(last["complete"])
        self.assertEqual((self.project / "config").read_text(), "new content\n")
        with self.assertRaises(envhost.RequestRefused) as caught:
            session._call(_protocol.write_file, "config", b"more", append=True, more=False)
        self.assertIn("append", caught.exception.message)

    def test_refusals_name_the_reason_and_the_session_goes_on(self):
        outside = self.project.parent / (self.project.name + "-outside")
        outside.mkdir()
        self.addCleanup(lambda: os.path.exists(outside) and __import__("shutil").rmtree(outside))
        (outside / "secret").write_text("secret")
        (self.project / "escape").symlink_to(outside)
        (self.project / "folder").mkdir()
        session = self.session()
        cases = [
            (lambda: session.read_file("missing"), "not_found"),
            (lambda: session.read_file("folder"), "is_directory"),
            (lambda: session.read_file("../" + outside.name + "/secret"), "outside_project"),
            (lambda: session.read_file(outside / "secret"), "outside_project"),
            (lambda: session.read_file("escape/secret"), "outside_project"),
            (lambda: session.write_file("escape/planted", b"x"), "outside_project"),
            (lambda: session.write_file("folder", b"x"), "is_directory"),
        ]
        for attempt, reason in cases:
            with self.assertRaises(envhost.RequestRefused) as caught:
                attempt()
            self.assertEqual(caught.exception.reason, reason, caught.exception.message)
        self.assertFalse((outside / "planted").exists())
        self.assertEqual(session.run("bash", "echo fine").output, "fine\n")

    def test_outside_the_project_when_allowed(self):
        outside = self.project.parent / (self.project.name + "-allowed")
        outside.mkdir()
        self.addCleanup(lambda: __import__("shutil").rmtree(outside))
        session = self.session(allow_outside_project=True)
        session.write_file(outside / "note", b"hi")
        self.assertEqual(session.read_file(outside / "note"), b"hi")
