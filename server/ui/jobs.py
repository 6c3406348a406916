"""Background re-ingest jobs started from the workspace page, with their progress.

One job per (project, folder) at a time; a job runs ``server.service.transfers.workspace.
ingest_workspace`` as the identity that started it (same allowed directories and rules as the
``ingest_workspace`` tool) in a thread, and the page polls its progress. Finished jobs are
kept (the last :data:`KEEP` of them) so the page can show their report.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field

from ingest.workspace.pipeline import IngestReport, Progress
from server.service.core.errors import NotFound, PatternError
from server.service.core.identity import Identity
from server.service.core.runtime import Runtime
from server.service.transfers.workspace import check_root, ingest_workspace

KEEP = 20


@dataclass
class IngestJob:
    id: str
    root: str
    project_id: str
    started: float = field(default_factory=time.time)
    progress: Progress | None = None
    report: IngestReport | None = None
    error: str | None = None
    done: bool = False
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def percent(self) -> int:
        p = self.progress
        if self.done:
            return 100
        if p is None or not p.files_total:
            return 0
        return min(99, int(100 * p.files_done / p.files_total))


class IngestJobs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, IngestJob] = {}

    def start(self, rt: Runtime, who: Identity, path: str) -> IngestJob:
        """Start (or join the running) re-ingest of ``path`` for ``who``'s project."""
        root = str(check_root(path, rt.settings.allowed_for(who), rt.settings.base_for(who)))
        with self._lock:
            for job in self._jobs.values():
                if not job.done and job.root == root and job.project_id == who.project_id:
                    return job
            job = IngestJob(id=secrets.token_urlsafe(12), root=root, project_id=who.project_id)
            self._jobs[job.id] = job
            done = [j for j in self._jobs.values() if j.done]
            for old in sorted(done, key=lambda j: j.started)[: max(0, len(done) - KEEP)]:
                self._jobs.pop(old.id, None)

        def progress(p: Progress) -> None:
            job.progress = p

        def run() -> None:
            try:
                job.report = ingest_workspace(rt, who, root, progress=progress, stop=job.stop)
            except PatternError as exc:
                job.error = f"[{exc.code}] {exc.message}"
            except Exception as exc:  # shown on the page; the daemon keeps serving
                job.error = f"{type(exc).__name__}: {exc}"
            finally:
                job.done = True

        threading.Thread(target=run, name=f"ui-ingest-{job.id}", daemon=True).start()
        return job

    def get(self, job_id: str, who: Identity) -> IngestJob:
        job = self._jobs.get(job_id)
        if job is None or job.project_id != who.project_id:
            raise NotFound(f"ingest job {job_id} not found", jobId=job_id)
        return job

    def running(self, who: Identity) -> list[IngestJob]:
        with self._lock:
            return [j for j in self._jobs.values() if j.project_id == who.project_id and not j.done]

    def stop_all(self) -> None:
        with self._lock:
            for job in self._jobs.values():
                job.stop.set()
