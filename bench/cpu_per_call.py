"""Benchmark (issue 16, point 6): the tool's own CPU per model call, in a zero-latency standard index.

    .venv/bin/python bench/cpu_per_call.py [--documents 100] [--latency 0] [--concurrency 25] [--top 15]
                                           [--no-profile]

The index is bench/latency_bound.py's (the first HotpotQA paragraphs of ../shared/corpora/hotpotqa-100, one
file each, the fake provider, 25 calls in flight, one gleaning, claims off, an empty answer cache), built in
this process. Every CPU second of the run is charged to one account:

- in the thread of the event loop, to the innermost region running: LiteLLM (what the gateway calls in it,
  and the tasks it starts), the fake provider (FakeLLM: it stands in for a remote server, computing answers
  and vectors), the gateway (chat and embed: limits, cache, ledger, token estimates, parsing the answers: the
  call path), else the stage running (prompts, chunking, clustering, tables, Parquet and LanceDB writes, and
  the event loop itself), else the runner between stages;
- other threads: LiteLLM runs the synchronous half of every call in the event loop's default executor (whose
  threads are measured before they end); LanceDB and Arrow (Parquet) work in native threads (read from /proc);
- the garbage collector's passes, in whichever thread they run (the one that allocated last), are the tool's:
  its objects are among those they walk, and how many there are is what the tool controls.

Then (unless --no-profile) the same index is built again in a child process under cProfile, for the own
code's hot spots: each function's own time plus the time of the library functions it calls (json, re,
pandas, tiktoken, sqlite3, asyncio), not counting what runs inside LiteLLM or the fake provider.
Start-up (imports, the token encoding) happens before the run and is printed apart.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import inspect
import os
import pstats
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Generator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import latency_bound

LITELLM, FAKE, CALL_PATH, RUNNER = "litellm", "fake provider", "call path", "runner between stages"
GC = "garbage collection"
IMPORTS, OTHER = "imports", "no own caller"
BUCKETS = (LITELLM, FAKE, IMPORTS, OTHER)  # where hot spots that are not own functions go
STAGE = "stage "  # + the stage's name
TICKS = os.sysconf("SC_CLK_TCK")


def project(folder: Path, args: argparse.Namespace) -> Path:
    (folder / "input").mkdir()
    (folder / "settings.yaml").write_text(latency_bound.settings(args, []), encoding="utf-8")
    latency_bound.write_corpus(folder / "input", "hotpotqa", args.documents)  # that bench's set-up
    return folder


def start_up() -> float:
    """Import what the run uses and load the token encoding: CPU seconds, paid once per process."""
    started = time.process_time()
    # graphrag_lite first: importing it sets the libraries' offline defaults (LiteLLM's price map, LanceDB's log)
    for module in ("graphrag_lite.llm.gateway", "graphrag_lite.fake.provider", "graphrag_lite.stages", "lancedb"):
        importlib.import_module(module)
    from graphrag_lite.tokens import get_encoding

    get_encoding("o200k_base").encode_ordinary("warm")
    return time.process_time() - started


# ---------------------------------------------------------------- accounting


class Account:
    """CPU of the event loop's thread, charged to the innermost region running (thread CPU between switches)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.spent: Counter[str] = Counter()
        self.stack = [RUNNER]
        self.mark = time.thread_time()
        self.switches = 0
        self.collected: Counter[str] = Counter()  # the collector's passes in other threads, by thread name
        self._collecting: dict[int, float] = {}

    def enter(self, category: str) -> None:
        if threading.get_ident() == self.thread:
            self._charge()
            self.stack.append(category)

    def leave(self) -> None:
        if threading.get_ident() == self.thread:
            self._charge()
            self.stack.pop()

    def settle(self) -> None:
        """Charge what ran since the last switch."""
        self._charge()

    def _charge(self) -> None:
        now = time.thread_time()
        self.spent[self.stack[-1]] += now - self.mark
        self.mark = now
        self.switches += 1

    def current(self) -> str:
        return self.stack[-1] if threading.get_ident() == self.thread else ""

    def collecting(self, phase: str, _: object) -> None:
        """A gc.callbacks hook: a pass runs in whichever thread allocated last, so it is charged to GC here,
        and counted apart in another thread."""
        if threading.get_ident() == self.thread and phase == "start":
            self.enter(GC)
        elif threading.get_ident() == self.thread:
            self.leave()
        elif phase == "start":
            self._collecting[threading.get_ident()] = time.thread_time()
        else:
            started = self._collecting.pop(threading.get_ident(), time.thread_time())
            self.collected[threading.current_thread().name] += time.thread_time() - started


class Timed(Coroutine[Any, Any, Any]):
    """An awaitable, and a coroutine for asyncio.Task, whose every step is charged to `category`. A task
    cancelled before it started closes `inner` as it would have closed it."""

    def __init__(self, account: Account, category: str, inner: Awaitable[Any]) -> None:
        self.account, self.category, self.steps = account, category, inner.__await__()

    def send(self, value: Any) -> Any:
        self.account.enter(self.category)
        try:
            return self.steps.send(value)
        finally:
            self.account.leave()

    def throw(self, *error: Any) -> Any:
        self.account.enter(self.category)
        try:
            return self.steps.throw(*error)
        finally:
            self.account.leave()

    def close(self) -> None:
        self.steps.close()  # type: ignore[attr-defined]

    def __await__(self) -> Generator[Any, Any, Any]:
        return self  # type: ignore[return-value]

    def __iter__(self) -> Timed:
        return self

    def __next__(self) -> Any:
        return self.send(None)


def charged(account: Account, category: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, its CPU charged to `category`, and so is the coroutine it returns when awaited."""
    def call(*args: Any, **kwargs: Any) -> Any:
        account.enter(category)
        try:
            result = function(*args, **kwargs)
        finally:
            account.leave()
        return Timed(account, category, result) if inspect.isawaitable(result) else result

    return call


class _Module:
    """LiteLLM as the gateway sees it, every function charged to LITELLM."""

    def __init__(self, module: Any, account: Account) -> None:
        self._module, self._account = module, account

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not callable(value) or isinstance(value, type):
            return value
        return charged(self._account, LITELLM, value)


class _Executor(ThreadPoolExecutor):
    """The event loop's default executor, whose threads' CPU is read before they end (at the loop's close)."""

    finished: ClassVar[Counter[str]] = Counter()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for thread in list(self._threads):
            _Executor.finished[thread.name.rsplit("_", 1)[0]] += thread_cpu().get(thread.native_id or 0, ("", 0.0))[1]
        super().shutdown(wait, cancel_futures=cancel_futures)


def instrument(account: Account, submitted: Counter[str]) -> None:
    """Charge LiteLLM, the fake provider, the gateway and each stage to their accounts."""
    import graphrag_lite.llm.gateway as gateway
    import graphrag_lite.pipeline.runner as pipeline
    from graphrag_lite.fake.provider import FakeLLM

    for name in ("chat", "embed", "cached_answer"):
        setattr(gateway.Gateway, name, charged(account, CALL_PATH, getattr(gateway.Gateway, name)))
    for name in ("acompletion", "aembedding"):
        setattr(FakeLLM, name, charged(account, FAKE, getattr(FakeLLM, name)))
    loader = gateway.load_litellm
    gateway.load_litellm = lambda models: _Module(loader(models), account)  # type: ignore[assignment]
    run_and_record = pipeline._run_and_record

    def stage(stage: Any, *args: Any, **kwargs: Any) -> Any:
        return charged(account, STAGE + stage.name, run_and_record)(stage, *args, **kwargs)

    pipeline._run_and_record = stage  # type: ignore[assignment]
    asyncio.set_event_loop_policy(_Policy(account, submitted))
    gc.callbacks.append(account.collecting)


class _Policy(asyncio.DefaultEventLoopPolicy):
    """Event loops whose tasks are charged where they were created (a task LiteLLM starts is LiteLLM's),
    with an executor whose threads are measured, counting who submits work to it."""

    def __init__(self, account: Account, submitted: Counter[str]) -> None:
        super().__init__()
        self.account, self.submitted = account, submitted

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        account, submitted, run_in_executor = self.account, self.submitted, loop.run_in_executor

        def create(loop: asyncio.AbstractEventLoop, coroutine: Any, **kwargs: Any) -> asyncio.Task[Any]:
            category = account.current()
            if category in (LITELLM, FAKE, CALL_PATH):
                coroutine = Timed(account, category, coroutine)
            return asyncio.Task(coroutine, loop=loop, **kwargs)

        def in_executor(executor: Any, function: Callable[..., Any], *args: Any) -> Any:
            submitted[account.current() or "another thread"] += 1
            return run_in_executor(executor, function, *args)

        loop.set_task_factory(create)
        loop.set_default_executor(_Executor(thread_name_prefix="default-executor"))
        loop.run_in_executor = in_executor  # type: ignore[method-assign]
        return loop


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds of every live thread of this process, by native id: (name, seconds). schedstat counts
    nanoseconds; stat, where there is no schedstat, counts clock ticks (10 ms)."""
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            if (task / "schedstat").exists():
                seconds = int((task / "schedstat").read_text().split()[0]) / 1e9
            else:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                seconds = (int(fields[11]) + int(fields[12])) / TICKS
        except OSError:  # ended meanwhile
            continue
        found[int(task.name)] = (name, seconds)
    return found


# ---------------------------------------------------------------- the measured run


def measured_run(args: argparse.Namespace) -> dict[str, Any]:
    from graphrag_lite.api import build_index

    account, submitted = Account(), Counter[str]()
    instrument(account, submitted)
    with tempfile.TemporaryDirectory() as folder:
        root = project(Path(folder), args)
        modules, before, process, wall = len(sys.modules), thread_cpu(), time.process_time(), time.perf_counter()
        account.mark = time.thread_time()
        summary = build_index(root)
        account.settle()
        process, wall = time.process_time() - process, time.perf_counter() - wall
        after = thread_cpu()
    names = {t.native_id: t.name for t in threading.enumerate()}
    others: Counter[str] = Counter()
    for tid, (comm, seconds) in after.items():
        if tid != threading.get_native_id():
            others[names.get(tid) or f"native: {comm}"] += seconds - before.get(tid, ("", 0.0))[1]
    for name, seconds in _Executor.finished.items():
        others[f"{name} (ended)"] += seconds
    llm = summary.llm or {}
    return {"calls": llm.get("calls", 0) - llm.get("cache_hits", 0), "process": process, "wall": wall,
            "main": dict(account.spent), "others": dict(others), "submitted": dict(submitted),
            "switches": account.switches, "status": summary.status, "imported": len(sys.modules) - modules,
            "collected": dict(account.collected)}


def report(result: dict[str, Any], start: float, args: argparse.Namespace) -> None:
    calls, main, others = max(result["calls"], 1), result["main"], result["others"]
    stages = {k: v for k, v in main.items() if k.startswith(STAGE)}
    collected = result["collected"]  # the collector's passes in other threads: taken out of theirs
    in_executor = sum(v for k, v in collected.items() if k.startswith("default-executor"))
    executor = sum(v for k, v in others.items() if k.startswith("default-executor")) - in_executor
    only_litellm = set(result["submitted"]) <= {LITELLM}
    native = sum(v for k, v in others.items() if not k.startswith("default-executor")) - \
        (sum(collected.values()) - in_executor)
    collector = main.get(GC, 0.0) + sum(collected.values())
    ended = result["process"] - sum(main.values()) - sum(others.values())
    litellm = main.get(LITELLM, 0.0) + (executor if only_litellm else 0.0)
    call_path = main.get(CALL_PATH, 0.0) + (0.0 if only_litellm else executor)
    # the collector's passes are counted as the tool's: its objects are among those they walk
    stage_work = sum(stages.values()) + main.get(RUNNER, 0.0) + collector + native + max(ended, 0.0)

    def line(label: str, seconds: float) -> None:
        print(f"  {label:60}{seconds:6.2f} s {seconds / calls * 1000:6.2f} ms/call")

    print(f"standard index of {args.documents} HotpotQA paragraphs, fake provider at {args.latency} s a call, "
          f"concurrency {args.concurrency}, one gleaning, claims off, no cache: {result['status']}")
    print(f"model calls sent: {result['calls']:,}; wall {result['wall']:.2f} s; start-up before it (imports, "
          f"encoding) {start:.2f} s CPU, not counted below")
    line("CPU of the run, all threads", result["process"])
    line("LiteLLM (event loop thread)", main.get(LITELLM, 0.0))
    line("LiteLLM (its synchronous half, in the default executor)" if only_litellm else
         f"default executor (submitted by {result['submitted']})", executor)
    line("fake provider computing answers and vectors (remote server)", main.get(FAKE, 0.0))
    line("own: call path (gateway, limits, cache, ledger, parsing)", call_path)
    for name, seconds in sorted(stages.items(), key=lambda item: -item[1]):
        line(f"own: {name} (outside its calls)", seconds)
    line("own: runner between stages (state, stats, fingerprints)", main.get(RUNNER, 0.0))
    line("own: garbage collection (all threads)", collector)
    line("own: native threads (Arrow's for Parquet, LanceDB's), ended ones", native + max(ended, 0.0))
    print(f"LiteLLM in all: {litellm:.2f} s ({litellm / calls * 1000:.2f} ms/call)")
    print(f"own CPU per call on the call path (gateway, cache, ledger, parsing): {call_path / calls * 1000:.2f} ms")
    print(f"own CPU per call including stage work: {(call_path + stage_work) / calls * 1000:.2f} ms "
          f"({call_path + stage_work:.2f} s)")
    print(f"(accounting: {result['switches']:,} region switches, charged to the region they leave; "
          f"{result['imported']} modules first imported during the run, charged where they were imported)")


# ---------------------------------------------------------------- hot spots


def profiled_run(args: argparse.Namespace, out: Path) -> None:
    from graphrag_lite.api import build_index

    with tempfile.TemporaryDirectory() as folder:
        root = project(Path(folder), args)
        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        build_index(root)
        profiler.disable()
    profiler.dump_stats(out)


def _kind(function: tuple[str, int, str]) -> str:
    path = function[0].replace("\\", "/")
    if "/litellm/" in path:
        return LITELLM
    if "graphrag_lite/fake/" in path:
        return FAKE
    if path.startswith("<frozen importlib"):
        return IMPORTS
    return "own" if "/graphrag_lite/" in path else "library"


def owners(stats: dict[Any, Any]) -> Callable[[Any], dict[Any, float]]:
    """Where a function's time belongs, as shares: to LITELLM or FAKE when it runs inside them, else to the
    innermost own function it runs in, else to OTHER. A function's time is split over its callers as their
    calls' cumulative times are (the approximation cProfile allows); a cycle back adds nothing."""
    memo: dict[Any, dict[Any, float]] = {}

    def find(function: Any, depth: int = 0) -> dict[Any, float]:
        kind = _kind(function)
        if kind in BUCKETS:
            return {kind: 1.0}
        if function in memo:
            return memo[function]
        memo[function] = {}  # in progress
        shares: dict[Any, float] = defaultdict(float)
        weight = 0.0
        for caller, edge in (stats[function][4] if function in stats and depth < 60 else {}).items():
            found = find(caller, depth + 1)
            if found and edge[3] > 0:
                weight += edge[3]
                for owner, share in found.items():
                    shares[function if kind == "own" and owner not in BUCKETS else owner] += edge[3] * share
        memo[function] = {owner: share / weight for owner, share in shares.items()} if weight else \
            {function if kind == "own" else OTHER: 1.0}
        return memo[function]

    return find


def hot_spots(path: Path, top: int) -> None:
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    find = owners(stats)
    sites: Counter[Any] = Counter()
    parts: dict[Any, Counter[str]] = defaultdict(Counter)
    for function, (_, _, own_time, _, _) in stats.items():
        for owner, share in find(function).items():
            sites[owner] += own_time * share
            if owner not in BUCKETS and function != owner:
                parts[owner][_name(function)] += own_time * share
    total = sum(v for k, v in sites.items() if k not in BUCKETS)
    print(f"\nown-code hot spots under cProfile (CPU of the event loop's thread, profiler overhead included): own "
          f"code {total:.2f} s, LiteLLM {sites[LITELLM]:.2f} s, fake provider {sites[FAKE]:.2f} s, imports "
          f"{sites[IMPORTS]:.2f} s, with no own caller {sites[OTHER]:.2f} s")
    for site, seconds in [(k, v) for k, v in sites.most_common() if k not in BUCKETS][:top]:
        inside = ", ".join(f"{name} {t:.2f}" for name, t in parts[site].most_common(3) if t >= 0.005)
        print(f"  {seconds:6.2f} s  {_name(site)}" + (f"  [{inside}]" if inside else ""))


def _name(function: tuple[str, int, str]) -> str:
    path, line, name = function
    if path == "~":
        return name
    short = re.split(r"site-packages/|graphrag_lite/|lib/python3\.\d+/", path)[-1]
    return f"{short}:{line} {name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--profile-to", type=Path, help=argparse.SUPPRESS)  # the child process's run
    args = parser.parse_args()
    start = start_up()
    if args.profile_to:
        profiled_run(args, args.profile_to)
        return
    report(measured_run(args), start, args)
    if not args.no_profile:
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "profile.out"
            subprocess.run([sys.executable, __file__, "--profile-to", str(out), "--documents", str(args.documents),
                            "--latency", str(args.latency), "--concurrency", str(args.concurrency)], check=True)
            hot_spots(out, args.top)


if __name__ == "__main__":
    main()
