"""Checkpoints: what each file-changing tool call replaced, so an edit can be undone.

Before a call that writes files (write_file, edit_file, str_replace, ...), the gateway
snapshots those files; after it, the store records one checkpoint — the tool, origin,
time and, per file, the content before and after — if anything changed. Contents live
content-addressed in ``.toold/checkpoints/objects/<sha256>``; ``index.jsonl`` lists the
checkpoints, oldest first, one signed entry per line, appended (index.py:
a call costs the same however many checkpoints are kept). The store is bounded by
``checkpoints.max_bytes``, counted as it changes: the oldest checkpoints go first, and
their objects with them once no entry names them. It works without git.

A call that runs a shell line or code (bash, background_run's job, python_repl) names no
files: around it the workspace's tree is walked by stat and what it created, changed or
deleted is recorded the same way (baseline.py, which says what it cannot cover).

Restoring checkpoint N puts every file touched by N and the (not undone) checkpoints
after it back as it was before N. It refuses, naming the files, when one changed since
toold last wrote it (outside toold), unless forced. A restore is itself a checkpoint, so
it can be restored in turn (redo).

The store is a workspace folder, so the agent or a cloned repository may have written it:
the index is parsed (every path a plain workspace path, every digest a SHA-256, at most
MAX_INDEX_BYTES), each object is checked against its digest, and every object a restore
needs is read before any file is written. Each index entry carries an HMAC-SHA256 under a
key kept outside the workspace (the user's: toold.user_state), bound to the workspace's
path; a restore or diff refuses an entry that does not verify, even forced, and objects
are authenticated by the signed digests naming them. An entry is signed once when
recorded and again when undone, so signing costs nothing per checkpoint kept. A restore
never writes into ``.git/`` or ``.toold/`` (any case, trailing dots or blanks, any depth)
nor through a symlink; toold.toml only when forced (the file watcher's reload then holds
any loosening in it and asks). Objects keep their file's mode, never wider (0600 when
unknown), in 0700 folders. A damaged store is a CheckpointStoreError naming the fix; it
is never overwritten, and the file tools go on without recording.
"""

from toold.checkpoints.diff import DIFF_MAX_LINES, unified_diff
from toold.checkpoints.index import INDEX, MAX_INDEX_BYTES, Checkpoint, FileChange
from toold.checkpoints.objects import KEY_NAME
from toold.checkpoints.restore import never_restored
from toold.checkpoints.store import CheckpointStore

__all__ = [
    "DIFF_MAX_LINES",
    "INDEX",
    "KEY_NAME",
    "MAX_INDEX_BYTES",
    "Checkpoint",
    "CheckpointStore",
    "FileChange",
    "never_restored",
    "unified_diff",
]
