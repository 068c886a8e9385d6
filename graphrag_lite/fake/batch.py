"""The fake provider's batch endpoint: LiteLLM's four batch and file functions for `fake/...` models, which
LiteLLM's own functions do not route to custom providers. Each request line names its call's stage and step
(`call`), as a plug-in's batch lines do, and is answered as the fake answers that call online.

    acreate_file(file=..., purpose="batch")            -> OpenAIFileObject
    acreate_batch(input_file_id=..., model=...)        -> LiteLLMBatch (status "validating")
    aretrieve_batch(batch_id=...)                      -> LiteLLMBatch (in_progress, then completed, ...)
    afile_content(file_id=...)                         -> HttpxBinaryResponseContent (JSONL in .content)

Files and batches live in a folder on disk, so a batch outlives the process that sent it, as a provider's
does: $GRAPHRAG_LITE_FAKE_BATCH_DIR, else graphrag-lite-fake-batches in the system's temporary folder. A
batch is done `batch_delay` seconds after it was sent (an option of the model string, like the fake's
others), and each request is then answered with the fake's own answer, cut at its max_tokens as the fake
cuts online answers. Faults, drawn from each request's custom_id (so a request sent again meets the same
fate), are options too:

    fake/default?batch_delay=2&batch_fail=0.1&batch_invalid=0.1&batch_status=expired

`batch_fail`: the share of requests answered with an error (in the batch's error file); `batch_invalid`:
the share answered with a reply cut off at the length limit, which no stage can use; `batch_status`: failed
(no answer at all), expired or cancelled (half the requests answered) instead of completed.
`submissions()` lists the batches sent, with their custom_ids, for tests to count.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from litellm.types.llms.openai import HttpxBinaryResponseContent, OpenAIFileObject
from litellm.types.utils import LiteLLMBatch
from openai.types.batch_request_counts import BatchRequestCounts

from graphrag_lite.fake.answers import UnknownCall, answer
from graphrag_lite.fake.options import Options
from graphrag_lite.fake.tokens import cut_at, provider_prompt_tokens

SUBMISSIONS = "submissions.jsonl"


def folder() -> Path:
    """Where the fake's files and batches are kept (the same for every process of a test or a user)."""
    configured = os.environ.get("GRAPHRAG_LITE_FAKE_BATCH_DIR")
    path = Path(configured) if configured else Path(tempfile.gettempdir()) / "graphrag-lite-fake-batches"
    for part in ("files", "batches"):
        (path / part).mkdir(parents=True, exist_ok=True)
    return path


def submissions() -> list[dict[str, Any]]:
    """The batches sent so far, oldest first: {"batch_id", "model", "custom_ids"}."""
    path = folder() / SUBMISSIONS
    return _lines(path.read_bytes()) if path.is_file() else []


async def acreate_file(*, file: Any, purpose: str, **_: Any) -> OpenAIFileObject:
    name, content = (file[0], file[1]) if isinstance(file, tuple) else ("batch.jsonl", file)
    return OpenAIFileObject(id=_store(bytes(content)), bytes=len(content), created_at=int(time.time()),
                            filename=str(name), object="file", purpose=purpose, status="uploaded")


async def acreate_batch(*, input_file_id: str, model: str, **_: Any) -> LiteLLMBatch:
    requests = _lines((folder() / "files" / input_file_id).read_bytes())
    batch = {"id": f"batch_{uuid.uuid4().hex}", "model": model, "input_file_id": input_file_id,
             "created_at": time.time(), "total": len(requests)}
    _write(folder() / "batches" / f"{batch['id']}.json", json.dumps(batch).encode())
    with open(folder() / SUBMISSIONS, "a", encoding="utf-8") as log:
        log.write(json.dumps({"batch_id": batch["id"], "model": model,
                              "custom_ids": [r["custom_id"] for r in requests]}) + "\n")
    return _batch_object(batch, "validating")


async def aretrieve_batch(*, batch_id: str, **_: Any) -> LiteLLMBatch:
    path = folder() / "batches" / f"{batch_id}.json"
    batch = json.loads(path.read_text(encoding="utf-8"))
    if "status" not in batch:  # not done when last asked
        elapsed = time.time() - batch["created_at"]
        delay = Options.parse(batch["model"]).batch_delay
        if elapsed < delay:
            return _batch_object(batch, "in_progress", done=int(batch["total"] * elapsed / delay))
        batch = _finish(batch)
        _write(path, json.dumps(batch).encode())
    return _batch_object(batch, batch["status"], done=batch["answered"], failed=batch["failed"])


async def afile_content(*, file_id: str, **_: Any) -> HttpxBinaryResponseContent:
    return HttpxBinaryResponseContent(httpx.Response(200, content=(folder() / "files" / file_id).read_bytes()))


def _finish(batch: dict[str, Any]) -> dict[str, Any]:
    """Answer a batch whose time has come: the output and error files, and how it ended."""
    options = Options.parse(batch["model"])
    status = options.batch_status or "completed"
    if status == "failed":  # refused as a whole (OpenAI: an input file it cannot read): no file at all
        batch.update(status=status, answered=0, failed=0)
        return batch
    requests = _lines((folder() / "files" / batch["input_file_id"]).read_bytes())
    answered = len(requests) if status == "completed" else len(requests) // 2  # expired or cancelled midway
    output, errors = [], []
    for position, request in enumerate(requests):
        if position >= answered:
            errors.append(_error_line(request["custom_id"], f"batch_{status}", f"the batch {status} first"))
        elif _share(request["custom_id"], "fail") < options.batch_fail:
            errors.append(_error_line(request["custom_id"], "server_error", "the fake failed this request"))
        else:
            try:
                output.append(_answer_line(request, options))
            except UnknownCall as err:  # as a provider refuses a request it cannot serve
                errors.append(_error_line(request["custom_id"], "invalid_request", str(err)))
            except Exception as err:  # a request the fake cannot read fails alone, never the whole batch
                errors.append(_error_line(request["custom_id"], "invalid_request", f"{type(err).__name__}: {err}"))
    batch.update(status=status, answered=len(output), failed=len(errors), output_file_id=_store_lines(output),
                 error_file_id=_store_lines(errors))
    return batch


def _answer_line(request: dict[str, Any], options: Options) -> dict[str, Any]:
    """A request answered as the fake answers it online (cut at max_tokens, with finish_reason "length")."""
    body, call = request["body"], request.get("call") or {}
    text, finish = answer(body["messages"], (str(call.get("stage", "")), str(call.get("step", "")))), "stop"
    if _share(request["custom_id"], "invalid") < options.batch_invalid:  # what no stage accepts from any model
        text, finish = text[: len(text) // 2], "length"
    text, finish, completion = cut_at(text, finish, body.get("max_tokens"))
    prompt = provider_prompt_tokens(body["messages"])
    response = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": body["model"], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                                  "total_tokens": prompt + completion},
                "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}]}
    return {"id": f"batch_req_{uuid.uuid4().hex}", "custom_id": request["custom_id"],
            "response": {"status_code": 200, "request_id": uuid.uuid4().hex, "body": response}, "error": None}


def _error_line(custom_id: str, code: str, message: str) -> dict[str, Any]:
    return {"id": f"batch_req_{uuid.uuid4().hex}", "custom_id": custom_id, "response": None,
            "error": {"code": code, "message": message}}


def _batch_object(batch: dict[str, Any], status: str, done: int = 0, failed: int = 0) -> LiteLLMBatch:
    return LiteLLMBatch(id=batch["id"], object="batch", endpoint="/v1/chat/completions", completion_window="24h",
                        input_file_id=batch["input_file_id"], created_at=int(batch["created_at"]),
                        status=status,
                        output_file_id=batch.get("output_file_id"), error_file_id=batch.get("error_file_id"),
                        request_counts=BatchRequestCounts(completed=done, failed=failed, total=batch["total"]))


def _share(custom_id: str, fault: str) -> float:
    """A number in [0, 1) fixed by the request and the fault: the same request fails the same way again."""
    digest = hashlib.blake2b(f"{fault}:{custom_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _store(content: bytes) -> str:
    """Keep `content` as a new file; returns its id."""
    file_id = f"file-{uuid.uuid4().hex}"
    _write(folder() / "files" / file_id, content)
    return file_id


def _store_lines(lines: list[dict[str, Any]]) -> str | None:
    return _store("".join(json.dumps(line) + "\n" for line in lines).encode()) if lines else None


def _lines(content: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in content.decode("utf-8").splitlines() if line.strip()]


def _write(path: Path, content: bytes) -> None:
    """Written whole or not at all: a process killed mid-write leaves no half file for the next one."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(content)
    partial.replace(path)
