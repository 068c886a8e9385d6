"""The run lock of an index on object storage: a lease object beside index.json, created only when there is
none (If-None-Match: *), holding who holds it and for how long, renewed by a heartbeat while the run lives
(If-Match on its own ETag) and taken over only once expired (If-Match on the expired one's ETag). Expiry is
judged on the store's clock (the object's last write against the time the store answers with), so machines
whose clocks differ agree on it. A run killed with -9 stops renewing: its lease expires and the next run
proceeds; a run that loses its lease (stalled past it, then taken over) stops before it commits."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from datetime import timedelta
from typing import Any

from graphrag_lite.errors import OutputLocked
from graphrag_lite.object_storage.s3 import Fetched, ObjectStore

LEASE_OBJECT = ".graphrag-lite.lease"
LOG = logging.getLogger("graphrag_lite.object_storage")


class Lease:
    def __init__(self, store: ObjectStore, seconds: float, holder: str) -> None:
        self.store = store
        self.seconds = seconds
        self.holder = f"pid {os.getpid()} on {socket.gethostname()}: {holder}"  # a command's name, never its options
        self.etag: str | None = None
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self) -> bytes:
        return json.dumps({"holder": self.holder, "seconds": self.seconds,
                           "renewed": time.strftime("%Y-%m-%d %H:%M:%S")}).encode()

    def acquire(self) -> None:
        """Take the lease (OutputLocked when a live run holds it) and start renewing it."""
        self._stop.clear()
        self.lost = None
        self.etag = self.store.put(LEASE_OBJECT, self._body(), if_absent=True)
        if self.etag is None:
            self.etag = self._take_over()
        self._thread = threading.Thread(target=self._renew, name="graphrag-lite lease", daemon=True)
        self._thread.start()

    def _take_over(self) -> str:
        held = self.store.fetch(LEASE_OBJECT)
        if held is None:  # released in between
            etag = self.store.put(LEASE_OBJECT, self._body(), if_absent=True)
        else:
            lease = _parsed(held.data)
            if _live(held, float(lease.get("seconds", self.seconds))):
                raise OutputLocked(f"another graphrag-lite run is writing to {self.store.uri} "
                                   f"({lease.get('holder', 'unknown holder')}, its lease renewed "
                                   f"{lease.get('renewed', '?')}); wait for it to finish, or stop it, then run this "
                                   f"command again (the lease of a run that was killed expires "
                                   f"{lease.get('seconds', self.seconds):g} s after its last renewal)")
            LOG.warning("the lease of %s expired (%s): taken over", self.store.uri, lease.get("holder"))
            etag = self.store.put(LEASE_OBJECT, self._body(), if_etag=held.etag)
        if etag is None:
            raise OutputLocked(f"another graphrag-lite run took the lease of {self.store.uri} at the same moment; "
                               "wait for it to finish, then run this command again")
        return etag

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                etag = self.store.put(LEASE_OBJECT, self._body(), if_etag=self.etag)
            except Exception as err:  # a store that does not answer for a while: try again at the next beat
                LOG.warning("renewing the lease of %s failed: %s", self.store.uri, err)
                continue
            if etag is None:
                self.lost = (f"this run lost its lease on {self.store.uri} (it was not renewed in time and another "
                             "run took it over); it stops before committing: run the command again once the other "
                             "run finished")
                LOG.error(self.lost)
                return
            self.etag = etag

    def check(self) -> None:
        """OutputLocked when the lease was lost: what this run would push could undo another run's work."""
        if self.lost:
            raise OutputLocked(self.lost)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.etag is not None and not self.lost:
            self.store.delete(LEASE_OBJECT, if_etag=self.etag)
        self.etag = None


def lease_is_live(store: ObjectStore) -> bool:
    """Whether a run holds the lease of the index at `store` now (a reader's question)."""
    held = store.fetch(LEASE_OBJECT)
    return held is not None and _live(held, float(_parsed(held.data).get("seconds", 60)))


def _live(held: Fetched, seconds: float) -> bool:
    """Not yet expired, by the store's clock: its last write plus its length against the time the store
    answered."""
    return held.server_now < held.modified + timedelta(seconds=seconds)


def _parsed(data: bytes) -> dict[str, Any]:
    try:
        lease = json.loads(data)
    except ValueError:
        return {}
    return lease if isinstance(lease, dict) else {}
