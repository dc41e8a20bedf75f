"""Stage-1 data augmentation (CUDA-L1's first stage): ask teacher endpoints for solutions of every
task, validate each on the benchmark pool, keep up to k correct variants per task.

`AugmentCollector` is the plain loop (no Ray: it is given the endpoints' clients and an
`evaluate` function, which `run_augment_job` binds to the primary benchmark pool's
`evaluate_many`):

1. Plan: task t gets `attempts_per_task` attempts; attempt i goes to endpoint i mod E (round
   robin, so each endpoint answers every task). Attempts already in the dataset are skipped, and
   so are tasks that already hold k kept variants.
2. Ask: one thread pool per endpoint (its `concurrency`) sends the plain prompt
   (`cudal1.policy.prompts.plain_prompt`), with seed crc32("<task_id>/<attempt>") + `seed`, through
   `EndpointClient` (retries with backoff). An attempt whose retries are spent is not recorded (a
   re-run asks it again) and is counted in the summary; an endpoint that answers 401/403/404 is
   asked nothing more in this run.
3. Validate: the driver thread takes the answers that arrived, parses them
   (`cudal1.policy.parsing`), evaluates the new codes in one `evaluate` call (the threads keep
   asking meanwhile), and appends one record per answer to the dataset (fsync) before it takes
   the next batch. A code already evaluated for the task is recorded as a duplicate of it, not
   evaluated again. A task that reaches k kept variants gets no more requests.

So an interrupted or flaky run loses only answers that were not yet validated, and a re-run
with the same dataset directory asks exactly for the attempts that have no record.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import queue
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cudal1.augment.dataset import AugmentRecord, DatasetWriter, utc_now
from cudal1.augment.endpoint import Answer, EndpointClient, EndpointError, EndpointSpec
from cudal1.policy.parsing import parse_response
from cudal1.policy.prompts import plain_prompt
from cudal1.records import Candidate
from cudal1.rl.buffer import code_hash
from cudal1.bench.result import UNPAID_LABELS, EvalResult, Status

log = logging.getLogger(__name__)


@dataclasses.dataclass
class AugmentSummary:
    """What one run did. `asked`: attempts planned and sent; `recorded`: records appended;
    `failed`: attempts whose endpoint failed for good (not recorded; a re-run asks again);
    `skipped`: attempts not sent (their task filled up, or their endpoint failed fatally);
    `retries`: requests repeated; `evaluated`: codes evaluated; `kept`: variants kept this run;
    `errors`: the endpoints' error lines by endpoint (first 20 each)."""

    asked: int = 0
    recorded: int = 0
    failed: int = 0
    skipped: int = 0
    retries: int = 0
    evaluated: int = 0
    kept: int = 0
    by_status: dict[str, int] = dataclasses.field(default_factory=dict)
    errors: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    started: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def attempt_seed(task_id: str, attempt: int, base: int = 0) -> int:
    """The request seed of one attempt: crc32("<task_id>/<attempt>") + base, below 2^31."""
    return (zlib.crc32(f"{task_id}/{attempt}".encode()) + base) % (2**31)


class AugmentCollector:
    """Asks, validates and records (see the module docstring).

    Args:
        dataset: the open dataset (records already there are not asked again).
        clients: one `EndpointClient` per endpoint, in round-robin order.
        evaluate: candidates -> one `EvalResult` each, in order (never raises for a
            candidate's fault; `BenchmarkPool.evaluate_many`).
        k: correct variants kept per task (>= 1).
        attempts_per_task: attempt budget per task (>= 1), shared round robin by the endpoints.
        seed: added to every request seed.
    """

    def __init__(
        self,
        dataset: DatasetWriter,
        clients: Sequence[EndpointClient],
        evaluate: Callable[[list[Candidate]], list[EvalResult]],
        k: int,
        attempts_per_task: int,
        seed: int = 0,
    ) -> None:
        if k < 1 or attempts_per_task < 1 or not clients:
            raise ValueError(
                f"need k >= 1, attempts_per_task >= 1 and an endpoint; got {k}, {attempts_per_task}, {len(clients)}"
            )
        self.dataset, self.clients, self.evaluate = dataset, list(clients), evaluate
        self.k, self.attempts, self.seed = k, attempts_per_task, seed
        # per (task_id, source_hash): code_hash -> first record of that code; kept count
        self._codes: dict[tuple[str, str], dict[str, AugmentRecord]] = {}
        self._kept: Counter[tuple[str, str]] = Counter()
        for r in dataset.records:
            self._remember(r)

    def _remember(self, r: AugmentRecord) -> None:
        task = (r.task_id, r.source_hash)
        if r.code_hash and r.duplicate_of is None:
            self._codes.setdefault(task, {}).setdefault(r.code_hash, r)
        self._kept[task] += int(r.kept)

    def plan(self, tasks: Sequence[Any]) -> list[tuple[Any, int, int]]:
        """(task, attempt, endpoint index) of every attempt still to ask, task by task."""
        done = self.dataset.done()
        out = []
        for t in tasks:
            if self._kept[(t.task_id, t.source_hash)] >= self.k:
                continue
            out += [
                (t, i, i % len(self.clients)) for i in range(self.attempts) if (t.task_id, t.source_hash, i) not in done
            ]
        return out

    def run(self, tasks: Sequence[Any]) -> AugmentSummary:
        """Ask for, validate and record every planned attempt of `tasks` (objects with task_id,
        source_hash, source). Returns the summary. On KeyboardInterrupt the requests not yet sent
        are cancelled, the answers already validated stay recorded, and the interrupt propagates."""
        summary = AugmentSummary(started=utc_now())
        t0 = time.perf_counter()
        plan = self.plan(tasks)
        summary.asked = len(plan)
        log.info(
            "augment: %d attempts to ask for %d tasks (%d already recorded)",
            len(plan),
            len(tasks),
            len(self.dataset.records),
        )
        answers: queue.Queue = queue.Queue()
        full: set[tuple[str, str]] = {
            (t.task_id, t.source_hash) for t in tasks if self._kept[(t.task_id, t.source_hash)] >= self.k
        }
        dead: set[int] = set()
        stop = threading.Event()

        def ask(task: Any, attempt: int, e: int) -> None:
            if stop.is_set() or e in dead or (task.task_id, task.source_hash) in full:
                answers.put(("skipped", task, attempt, e, None))
                return
            try:
                answer = self.clients[e].complete(
                    plain_prompt(task.source), attempt_seed(task.task_id, attempt, self.seed)
                )
                answers.put(("answer", task, attempt, e, answer))
            except EndpointError as err:
                if err.fatal:
                    dead.add(e)
                answers.put(("error", task, attempt, e, err))
            except BaseException as err:  # a bug: reported by the driver thread, never lost silently
                answers.put(("error", task, attempt, e, err))

        pools = [
            concurrent.futures.ThreadPoolExecutor(
                max_workers=c.spec.concurrency, thread_name_prefix=f"augment-{c.spec.name}"
            )
            for c in self.clients
        ]
        try:
            for task, attempt, e in plan:
                pools[e].submit(ask, task, attempt, e)
            outstanding = len(plan)
            while outstanding:
                batch = [answers.get()]
                while True:
                    try:
                        batch.append(answers.get_nowait())
                    except queue.Empty:
                        break
                outstanding -= len(batch)
                got = []
                for kind, task, attempt, e, item in batch:
                    name = self.clients[e].spec.name
                    if kind == "skipped":
                        summary.skipped += 1
                    elif kind == "error":
                        if not isinstance(item, EndpointError):
                            raise item
                        summary.failed += 1
                        summary.retries += item.retries
                        _note_errors(summary, name, item.errors)
                        log.warning("augment: %s attempt %d: %s", task.task_id, attempt, item)
                    else:
                        summary.retries += item.retries
                        _note_errors(summary, name, item.errors)
                        got.append((task, attempt, e, item))
                if got:
                    records = self._validate(got, summary)
                    self.dataset.append(records)
                    summary.recorded += len(records)
                    for r in records:
                        summary.by_status[r.status] = summary.by_status.get(r.status, 0) + 1
                        if self._kept[(r.task_id, r.source_hash)] >= self.k:
                            full.add((r.task_id, r.source_hash))
        except BaseException:
            stop.set()  # requests not yet sent are skipped; those in flight end within their timeout
            for p in pools:
                p.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            for p in pools:
                p.shutdown(wait=not stop.is_set(), cancel_futures=True)
            summary.seconds = round(time.perf_counter() - t0, 3)
        return summary

    def _validate(self, got: list[tuple[Any, int, int, Answer]], summary: AugmentSummary) -> list[AugmentRecord]:
        """Records for one batch of answers: parsed, new codes evaluated together, duplicates
        pointed at their first record, the first k distinct correct codes per task kept."""
        records: list[AugmentRecord] = []
        to_eval: list[tuple[AugmentRecord, Candidate]] = []
        pending: dict[tuple[tuple[str, str], str], AugmentRecord] = {}
        for task, attempt, e, answer in got:
            spec = self.clients[e].spec
            parsed = parse_response(answer.text)
            r = AugmentRecord(
                task.task_id,
                task.source_hash,
                attempt,
                spec.name,
                spec.model,
                status="parse_error",
                analysis=parsed.sections.get("analysis", ""),
                design=parsed.sections.get("design", ""),
                response=answer.text,
                finish_reason=answer.finish_reason,
                retries=answer.retries,
                latency_s=round(answer.latency_s, 3),
                usage=answer.usage,
                time=utc_now(),
            )
            records.append(r)
            if parsed.code is None:
                r.labels = [f"parse_error:{parsed.error}"]
                r.message = f"no usable code in the answer ({parsed.error})"
                continue
            r.code, r.code_hash = parsed.code, code_hash(parsed.code)
            key = (task.task_id, task.source_hash)
            first = self._codes.get(key, {}).get(r.code_hash) or pending.get((key, r.code_hash))
            if first is not None:
                r.duplicate_of = first.attempt
                continue
            pending[(key, r.code_hash)] = r
            to_eval.append((r, Candidate(task.task_id, parsed.code, origin=f"augment/{spec.name}/{attempt}")))
        if to_eval:
            results = self.evaluate([c for _, c in to_eval])
            summary.evaluated += len(to_eval)
            for (r, _), res in zip(to_eval, results):
                r.result = {k: v for k, v in res.to_dict().items() if k != "log"}
                r.status = res.status.value
                r.speedup = res.speedup if res.status is Status.OK else None
                r.labels = list(res.labels)
                r.hack_kind = res.hack_kind.value if res.hack_kind is not None else None
                r.message = res.message[:500]
        for r in records:
            if r.duplicate_of is not None:  # copy the verdict of the code's first record
                first = (
                    self._codes.get((r.task_id, r.source_hash), {}).get(r.code_hash)
                    or pending[((r.task_id, r.source_hash), r.code_hash)]
                )
                r.status, r.speedup, r.labels = first.status, first.speedup, list(first.labels)
                r.hack_kind, r.message = first.hack_kind, first.message
            elif (
                r.correct
                and not UNPAID_LABELS.intersection(r.labels)
                and self._kept[(r.task_id, r.source_hash)] < self.k
            ):
                r.kept = True
                summary.kept += 1
            self._remember(r)
        return records


def _note_errors(summary: AugmentSummary, endpoint: str, errors: list[str], limit: int = 20) -> None:
    """Keep the first `limit` error lines of each endpoint in the summary."""
    kept = summary.errors.setdefault(endpoint, []) if errors else None
    if kept is not None:
        kept.extend(errors[: max(0, limit - len(kept))])


def endpoint_specs(cfg: Any) -> list[EndpointSpec]:
    """`EndpointSpec`s of a validated augment config's `endpoints`."""
    fields = {f.name for f in dataclasses.fields(EndpointSpec)}
    from omegaconf import OmegaConf

    return [EndpointSpec(**{k: v for k, v in OmegaConf.to_container(e).items() if k in fields}) for e in cfg.endpoints]


def run_augment_job(cfg: Any, pools: Any = None) -> AugmentSummary:
    """`jobs/augment.py`: ask `cfg.endpoints` for every task `cfg.tasks` selects, validate the
    answers on the primary pool of `cfg.bench` (or of `pools`, a running `BenchmarkPools` the
    caller owns), and append them to the dataset in `cfg.out_dir`; the manifest is rewritten at
    the start and at the end (also after an error or Ctrl-C). With nothing left to ask no pool is
    started. Returns this run's summary. Raises what `DatasetWriter`, `start_ray` and pool
    creation raise."""
    import os

    from cudal1.actors.bench_pool import BenchmarkPools
    from cudal1.actors.pool_spec import pool_specs
    from cudal1.launch import select_tasks, start_ray, usable_tasks

    out = Path(cfg.out_dir).expanduser().resolve()
    tasks = select_tasks(cfg)
    specs = endpoint_specs(cfg)
    keys = {e.name: (os.environ.get(e.api_key_env) if e.api_key_env else None) for e in cfg.endpoints}
    dataset = DatasetWriter(out, cfg.version)
    manifest_fields = {
        "k": cfg.k,
        "attempts_per_task": cfg.attempts_per_task,
        "seed": cfg.seed,
        "prompt": "plain",
        "bench": {"pool": cfg.bench.primary, "backend": cfg.bench.pools[cfg.bench.primary].backend},
    }
    task_rows = [{"task_id": t.task_id, "name": t.name, "suite": t.suite, "source_hash": t.source_hash} for t in tasks]
    endpoints = [s.public() for s in specs]
    dataset.write_manifest(endpoints, task_rows, **manifest_fields)
    log.info("augment: dataset %s (version %s, %d records so far)", out, cfg.version, len(dataset.records))
    summary = AugmentSummary(started=utc_now())
    clients = [EndpointClient(s, keys[s.name]) for s in specs]
    status = "failed"
    try:

        def collect(running: Any) -> AugmentSummary:
            usable = usable_tasks(tasks, running.primary.probe_tasks([t.task_id for t in tasks]))
            collector = AugmentCollector(
                dataset,
                clients,
                lambda cs: running.primary.evaluate_many(cs, progress=False),
                k=cfg.k,
                attempts_per_task=cfg.attempts_per_task,
                seed=cfg.seed,
            )
            return collector.run(usable)

        planner = AugmentCollector(dataset, clients, lambda cs: [], k=cfg.k, attempts_per_task=cfg.attempts_per_task)
        if not planner.plan(tasks):
            log.info("augment: every attempt of the %d tasks is recorded already; nothing to ask", len(tasks))
        elif pools is not None:
            summary = collect(pools)
        else:
            start_ray(cfg)
            with BenchmarkPools(
                list(pool_specs(cfg.bench.pools, cfg.tasks.source).values()), primary=cfg.bench.primary
            ) as running:
                summary = collect(running)
        status = "finished" if not summary.failed else "incomplete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        for c in clients:
            c.close()
        m = dataset.write_manifest(endpoints, task_rows, run={**summary.to_dict(), "status": status}, **manifest_fields)
        dataset.close()
        counts = m["counts"]
        log.info(
            "augment: %s; this run: %d asked, %d recorded, %d failed at the endpoint, %d retries, %d evaluated, "
            "%d kept; dataset: %d records, %d correct, %d kept variants for %d tasks, in %s",
            status,
            summary.asked,
            summary.recorded,
            summary.failed,
            summary.retries,
            summary.evaluated,
            summary.kept,
            counts["records"],
            counts["correct"],
            counts["kept"],
            sum(1 for t in counts["tasks"].values() if t["kept"]),
            out,
        )
        if summary.failed:
            log.warning(
                "augment: %d attempts failed at their endpoint and are not recorded: run the same command "
                "again to ask for them",
                summary.failed,
            )
    return summary
